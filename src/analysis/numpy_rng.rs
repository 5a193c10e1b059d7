//! numpy's legacy `RandomState` (MT19937), as far as scikit-learn's fold shuffling uses it, so
//! that `StratifiedKFold(shuffle=True, random_state=seed)` deals exactly the same folds here.
//!
//! Checked against numpy in `tests/golden/stats/folds.json` (`tests/golden/make_folds.py`).

const N: usize = 624;
const M: usize = 397;

/// MT19937 seeded as `numpy.random.RandomState(seed)` seeds it (`init_genrand`).
#[derive(Clone)]
pub struct RandomState {
    mt: [u32; N],
    pos: usize,
}

impl RandomState {
    pub fn new(seed: u32) -> Self {
        let mut mt = [0u32; N];
        mt[0] = seed;
        for i in 1..N {
            mt[i] = 1_812_433_253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Self { mt, pos: N }
    }

    fn generate(&mut self) {
        const UPPER: u32 = 0x8000_0000;
        const LOWER: u32 = 0x7fff_ffff;
        const MATRIX_A: u32 = 0x9908_b0df;
        for i in 0..N {
            let y = (self.mt[i] & UPPER) | (self.mt[(i + 1) % N] & LOWER);
            let mag = if y & 1 == 1 { MATRIX_A } else { 0 };
            self.mt[i] = self.mt[(i + M) % N] ^ (y >> 1) ^ mag;
        }
        self.pos = 0;
    }

    /// `genrand_int32`.
    pub fn next_u32(&mut self) -> u32 {
        if self.pos >= N {
            self.generate();
        }
        let mut y = self.mt[self.pos];
        self.pos += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// numpy's `random_interval`: uniform in [0, max] by masked rejection (`max` < 2^32 here).
    pub fn interval(&mut self, max: u32) -> u32 {
        if max == 0 {
            return 0;
        }
        let mut mask = max;
        mask |= mask >> 1;
        mask |= mask >> 2;
        mask |= mask >> 4;
        mask |= mask >> 8;
        mask |= mask >> 16;
        loop {
            let v = self.next_u32() & mask;
            if v <= max {
                return v;
            }
        }
    }

    /// `RandomState.shuffle` of a 1-D array (Fisher-Yates from the end).
    pub fn shuffle<T>(&mut self, x: &mut [T]) {
        for i in (1..x.len()).rev() {
            let j = self.interval(i as u32) as usize;
            x.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_mt19937_output() {
        // The reference implementation's first output for init_genrand(5489).
        assert_eq!(RandomState::new(5489).next_u32(), 3_499_211_612);
    }
}
