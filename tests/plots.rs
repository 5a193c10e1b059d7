//! Every chart function checked on its data: traces, axes, hover text carrying the right tokens;
//! plus the offline HTML and the static SVG.

mod common;

use std::sync::OnceLock;

use entropy_lens::analysis::{pca, Projection};
use entropy_lens::lens::StatSpec;
use entropy_lens::model::{load, LoadOptions, ModelSource};
use entropy_lens::plots::{
    delta_bars, depth_normalized, entropy_heatmap, mean_profile_bands, profile_lines,
    profile_table, projection_scatter, renyi_lines, renyi_similarity, skip_curves, HeatMetric,
};
use entropy_lens::profile::EntropyProfile;
use entropy_lens::runner::{ProfileRequest, Profiler};
use ndarray::{array, Array2};
use serde_json::Value;

const PROMPT: &str = "The Eiffel Tower is located in the city of";

fn setup() -> &'static (Profiler, EntropyProfile) {
    static CELL: OnceLock<(Profiler, EntropyProfile)> = OnceLock::new();
    CELL.get_or_init(|| {
        let spec = StatSpec {
            alphas: vec![0.5, 2.0],
            top_k: 3,
            ..Default::default()
        };
        let mut p = Profiler::new(
            load(&ModelSource::Gguf(common::smollm2()), &LoadOptions::cpu()).unwrap(),
            spec,
        )
        .unwrap();
        let profile = p
            .run(&ProfileRequest::new(PROMPT).all_positions(true).generate(3))
            .unwrap();
        (p, profile)
    })
}

fn json(chart: &entropy_lens::plots::Chart) -> Value {
    serde_json::from_str(&chart.to_json()).unwrap()
}

#[test]
fn heatmap_cells_hover_with_the_lens_tokens() {
    let (prof, profile) = setup();
    let chart = entropy_heatmap(profile, Some(&prof.tokenizer), HeatMetric::Shannon).unwrap();
    let v = json(&chart);
    let t = &v["data"][0];
    assert_eq!(t["type"], "heatmap");
    let n = profile.positions.len();
    assert_eq!(n, 10 + 2);
    assert_eq!(t["x"].as_array().unwrap().len(), n);
    assert_eq!(t["y"].as_array().unwrap().len(), 30);
    assert_eq!(t["y"][0], "block 1");
    let z = t["z"].as_array().unwrap();
    assert_eq!(z.len(), 30);
    // z[block][position] is the profile's Shannon entropy.
    assert_eq!(z[29][9].as_f64().unwrap(), profile.positions[9].shannon[29]);
    // At the last prompt position the last block predicts " Paris": the hover and the cell say so.
    let hover = t["hovertext"][29][9].as_str().unwrap();
    assert!(
        hover.contains("\" Paris\"") && hover.contains("block 30") && hover.contains("top-3"),
        "{hover}"
    );
    assert_eq!(t["text"][29][9], "\" Paris\"");
    assert!(t["x"][9].as_str().unwrap().contains("\" of\""));
    // Top-p counts and Rényi views of the same data.
    let c = entropy_heatmap(profile, None, HeatMetric::TopPCount).unwrap();
    assert!(json(&c)["data"][0]["hovertext"][0][0]
        .as_str()
        .unwrap()
        .contains('#'));
    let r = entropy_heatmap(profile, None, HeatMetric::Renyi(2.0)).unwrap();
    assert_eq!(
        json(&r)["data"][0]["z"][3][1].as_f64().unwrap(),
        profile.positions[1].renyi["2"][3]
    );
    assert!(entropy_heatmap(profile, None, HeatMetric::Renyi(7.0)).is_err());
}

#[test]
fn lines_bands_and_depth() {
    let (_, profile) = setup();
    let chart = profile_lines(profile, Some(&[9, 10]), HeatMetric::Shannon).unwrap();
    let v = json(&chart);
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_eq!(v["data"][0]["x"][0], 1.0);
    assert_eq!(v["data"][0]["y"].as_array().unwrap().len(), 30);
    assert!(v["data"][0]["name"].as_str().unwrap().contains("Paris"));
    assert_eq!(v["layout"]["xaxis"]["title"]["text"], "block");
    assert!(profile_lines(profile, Some(&[99]), HeatMetric::Shannon).is_err());

    let m = profile.shannon_matrix().unwrap();
    let chart = mean_profile_bands(&[("all".into(), m.clone())], "H (nats)").unwrap();
    let v = json(&chart);
    let traces = v["data"].as_array().unwrap();
    assert_eq!(traces.len(), 3); // +σ, −σ (filled to the previous), mean
    assert_eq!(traces[1]["fill"], "tonexty");
    let mean0 = m.column(0).mean().unwrap();
    assert!((traces[2]["y"][0].as_f64().unwrap() - mean0).abs() < 1e-12);

    let prof: Vec<f64> = profile.positions[9].shannon.clone();
    let chart = depth_normalized(
        &[
            ("SmolLM2".into(), prof.clone()),
            ("short".into(), vec![1.0, 2.0, 3.0]),
        ],
        11,
    )
    .unwrap();
    let v = json(&chart);
    assert_eq!(v["data"][0]["x"][10], 1.0);
    assert_eq!(v["data"][0]["y"][0].as_f64().unwrap(), prof[0]);
    assert_eq!(v["data"][0]["y"][10].as_f64().unwrap(), prof[29]);
    assert_eq!(v["data"][1]["y"][5].as_f64().unwrap(), 2.0);
}

#[test]
fn renyi_lines_order_the_alphas() {
    let (_, profile) = setup();
    let v = json(&renyi_lines(profile, 9).unwrap());
    let names: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["α = 0.5", "α = 1 (Shannon)", "α = 2"]);
    let p = &profile.positions[9];
    assert_eq!(v["data"][0]["y"][7].as_f64().unwrap(), p.renyi["0.5"][7]);
    assert_eq!(v["data"][1]["y"][7].as_f64().unwrap(), p.shannon[7]);
    // Rényi entropy falls with α.
    for j in 0..30 {
        assert!(p.renyi["0.5"][j] >= p.shannon[j] - 1e-9 && p.shannon[j] >= p.renyi["2"][j] - 1e-9);
    }
}

#[test]
fn delta_bars_colour_expansion_and_pruning() {
    let (_, profile) = setup();
    let p = &profile.positions[9];
    let chart = delta_bars(profile, 9).unwrap();
    let v = json(&chart);
    let t = &v["data"][0];
    assert_eq!(t["type"], "bar");
    assert_eq!(t["y"].as_array().unwrap().len(), 29);
    for j in 1..30 {
        let dh = t["y"][j - 1].as_f64().unwrap();
        assert!((dh - (p.shannon[j] - p.shannon[j - 1])).abs() < 1e-12);
        let color = t["marker"]["color"][j - 1].as_str().unwrap();
        let expect = match p.top_p_count[j].cmp(&p.top_p_count[j - 1]) {
            std::cmp::Ordering::Greater => "#2ca02c",
            std::cmp::Ordering::Less => "#d62728",
            std::cmp::Ordering::Equal => "#7f7f7f",
        };
        assert_eq!(color, expect, "block {}", j + 1);
        assert_eq!(t["text"][j - 1], p.top_p_count[j].to_string());
    }
    assert!(delta_bars(profile, 50).is_err());
}

#[test]
fn scatter_skip_curves_and_renyi_similarity() {
    let x = array![
        [0.0, 0.0, 1.0],
        [0.1, 0.0, 1.1],
        [5.0, 5.0, 0.0],
        [5.2, 4.9, 0.1]
    ];
    let proj: Projection = pca(x.view(), 2).unwrap();
    let labels: Vec<String> = ["a", "a", "b", "b"].iter().map(|s| s.to_string()).collect();
    let chart = projection_scatter(&proj, &labels, Some(&[1.0, 2.0, 3.0, 4.0])).unwrap();
    let v = json(&chart);
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_eq!(v["data"][0]["name"], "a");
    assert_eq!(v["data"][1]["x"].as_array().unwrap().len(), 2);
    assert_eq!(v["data"][1]["marker"]["size"][1], 24);
    assert!(chart.title().contains("PCA"));
    assert!(projection_scatter(&proj, &labels[..3], None).is_err());

    let chart = skip_curves(
        &[0.0, 0.1, 0.2],
        &[
            ("expansion".into(), vec![1.0, 0.7, 0.4]),
            ("pruning".into(), vec![1.0, 0.9, 0.8]),
        ],
    )
    .unwrap();
    let v = json(&chart);
    assert_eq!(v["data"][0]["name"], "expansion");
    assert_eq!(v["data"][1]["y"][2], 0.8);
    assert!(skip_curves(&[0.0], &[("x".into(), vec![1.0, 2.0])]).is_err());

    let f1 = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]];
    let f2 = array![[1.0, 1.0], [2.0, 2.0], [3.0, 3.1]];
    let (chart, sigma) = renyi_similarity(&[0.5, 5.0], &[f1, f2]).unwrap();
    let v = json(&chart);
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert_eq!(v["data"][1]["xaxis"], "x2");
    let z = &v["data"][0]["z"];
    assert!((z[0][0].as_f64().unwrap() - 1.0).abs() < 1e-12);
    assert!((z[0][1].as_f64().unwrap()).abs() < 1e-12);
    assert!((z[0][2].as_f64().unwrap() - 0.5f64.sqrt()).abs() < 1e-12);
    // Nearly parallel profiles: flat similarity, small σ.
    assert!(sigma[1] < sigma[0], "{sigma:?}");
    assert!(v["layout"]["annotations"][1]["text"]
        .as_str()
        .unwrap()
        .contains("α = 5"));
    assert!(renyi_similarity(&[0.5], &[Array2::zeros((2, 2)), Array2::zeros((2, 2))]).is_err());
}

#[test]
fn profile_table_lists_every_block() {
    let (prof, profile) = setup();
    let t = profile_table(profile, 9, Some(&prof.tokenizer)).unwrap();
    assert_eq!(t.rows().len(), 30);
    assert!(
        t.rows()[29][4].starts_with("\" Paris\""),
        "{:?}",
        t.rows()[29]
    );
    assert_eq!(t.rows()[0][2], "");
    let html = t.to_html();
    assert!(html.contains("<table") && html.contains("H_0.5"));
}

#[test]
fn html_is_offline_and_svg_is_a_sketch() {
    let (prof, profile) = setup();
    let chart = entropy_heatmap(profile, Some(&prof.tokenizer), HeatMetric::Shannon).unwrap();
    let page = chart.to_standalone_html();
    assert!(page.contains("plotly.js v3.0.1"), "plotly.js is embedded");
    // Nothing is loaded from elsewhere: outside the embedded library, the page names no URL.
    let ours = page.replace(&entropy_lens::plots::plotly_js_script(), "");
    assert!(
        !ours.contains("src=") && !ours.contains("href="),
        "external reference"
    );
    assert!(page.contains("Plotly.newPlot"));
    // The first notebook display carries plotly.js, the next ones only the chart.
    entropy_lens::plots::reset_plotly_js();
    assert!(chart.notebook_html().contains("plotly.js v3.0.1"));
    assert!(!chart.notebook_html().contains("plotly.js v3.0.1"));
    let svg = chart.to_svg();
    assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
    assert!(svg.matches("<rect").count() >= 30 * profile.positions.len());
    let dir = tempfile::tempdir().unwrap();
    chart.save_html(dir.path().join("c.html")).unwrap();
    chart.save_svg(dir.path().join("c.svg")).unwrap();
    assert!(std::fs::metadata(dir.path().join("c.html")).unwrap().len() > 4_000_000);
}

/// KL by block (one line per lens), the rank heatmap of the next token, and the mid-block axis.
#[test]
fn kl_lines_rank_heatmap_and_the_mid_block_axis() {
    use entropy_lens::lens::TargetToken;
    use entropy_lens::plots::{kl_by_block, target_rank_heatmap};
    use entropy_lens::profile::ReadPoint;
    let spec = StatSpec {
        kl_to_final: true,
        target: TargetToken::Next,
        top_k: 1,
        ..Default::default()
    };
    let mut p = Profiler::new(
        load(&ModelSource::Gguf(common::smollm2()), &LoadOptions::cpu()).unwrap(),
        spec,
    )
    .unwrap();
    let req = ProfileRequest::new(PROMPT).all_positions(true).generate(2);
    let blocks = p.run(&req).unwrap();
    p.set_read_point(ReadPoint::Both).unwrap();
    let both = p.run(&req).unwrap();

    let v = json(&kl_by_block(&[("after blocks", &blocks), ("both points", &both)]).unwrap());
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    let mean_kl_3: f64 = blocks
        .positions
        .iter()
        .map(|q| q.kl_to_final.as_ref().unwrap()[3])
        .sum::<f64>()
        / blocks.positions.len() as f64;
    assert!((v["data"][0]["y"][3].as_f64().unwrap() - mean_kl_3).abs() < 1e-12);
    assert_eq!(v["data"][0]["x"][3], 4.0);
    // Read at both points: 3.5 is block 4's attention output, 4 its output.
    assert_eq!(v["data"][1]["x"][6], 3.5);
    assert_eq!(v["data"][1]["x"][7], 4.0);
    assert_eq!(*v["data"][0]["y"].as_array().unwrap().last().unwrap(), 0.0);

    let h = json(&target_rank_heatmap(&blocks, Some(&p.tokenizer)).unwrap());
    let t = &h["data"][0];
    // Every position has a next token (the prompt's or the generated one).
    assert_eq!(t["x"].as_array().unwrap().len(), blocks.positions.len());
    assert!(
        t["x"][9].as_str().unwrap().contains("\" Paris\""),
        "{}",
        t["x"][9]
    );
    // Greedy: the generated token is the final block's top-1.
    assert_eq!(t["text"][29][9], "1");
    assert_eq!(t["z"][29][9].as_f64().unwrap(), 0.0);
    let hb = json(&target_rank_heatmap(&both, None).unwrap());
    assert_eq!(hb["data"][0]["y"][0], "block 1.a");
    assert_eq!(hb["data"][0]["y"].as_array().unwrap().len(), 60);
    // Without KL or targets measured: clear errors.
    let (_, plain) = setup();
    let e = kl_by_block(&[("x", plain)]).unwrap_err().to_string();
    assert!(e.contains("--kl"), "{e}");
    assert!(target_rank_heatmap(plain, None)
        .unwrap_err()
        .to_string()
        .contains("--target next"));
}

/// A log y axis: plotly's layout says so, the sketch places 10 halfway between 1 and 100 and
/// labels the axis ends with the values themselves; a value a log axis cannot show is an error.
#[test]
fn log_y_lines_place_decades_evenly() {
    use entropy_lens::plots::{xy_lines, xy_lines_log_y};
    let series = vec![(
        "kl".to_string(),
        vec![0.0, 1.0, 2.0],
        vec![100.0, 10.0, 1.0],
    )];
    let chart = xy_lines_log_y("t", "layer", "KL", series.clone()).unwrap();
    let layout: Value = serde_json::from_str(&chart.to_json()).unwrap();
    assert_eq!(layout["layout"]["yaxis"]["type"], "log", "{layout}");
    let ys = |svg: &str| -> Vec<f64> {
        let pts = svg.split("<polyline points=\"").nth(1).unwrap();
        let pts = &pts[..pts.find('"').unwrap()];
        pts.split(' ')
            .map(|p| p.split(',').nth(1).unwrap().parse().unwrap())
            .collect()
    };
    let log = ys(&chart.to_svg());
    assert!(
        (log[1] - (log[0] + log[2]) / 2.0).abs() < 0.2,
        "10 sits halfway: {log:?}"
    );
    assert!(chart.to_svg().contains(">100.000<") && chart.to_svg().contains(">1.000<"));
    // On a linear axis 10 sits near 1.
    let lin = ys(&xy_lines("t", "layer", "KL", series).unwrap().to_svg());
    assert!(
        (lin[1] - lin[2]).abs() < (lin[1] - lin[0]).abs() / 5.0,
        "{lin:?}"
    );
    let bad = vec![("kl".to_string(), vec![0.0, 1.0], vec![1.0, 0.0])];
    let e = xy_lines_log_y("t", "x", "y", bad).unwrap_err().to_string();
    assert!(e.contains("not positive"), "{e}");
}
