//! TinyStories and the paper's task-type prompts (Section 5.2, Appendix B.2): a generative,
//! syntactic or semantic instruction combined with a story in a base, reversed or scrambled
//! template.
//!
//! Stories load from a local JSON Lines file (`{"text": ...}` per line), a text file with stories
//! separated by `<|endoftext|>`, or the Hub dataset `roneneldan/TinyStories`.

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The Hub dataset and its validation text file.
pub const HUB_DATASET: &str = "roneneldan/TinyStories";
pub const HUB_VALID_FILE: &str = "TinyStories-valid.txt";

/// The first 60 stories of the validation split, shipped in `data/` and embedded in the library
/// (enough for smoke-scale runs anywhere).
pub const SAMPLE_STORIES: &str = include_str!("../../data/tinystories_valid_sample.jsonl");

/// The embedded 60-story sample.
pub fn sample_stories() -> Result<Vec<String>> {
    parse_stories(SAMPLE_STORIES, true, "the embedded TinyStories sample")
}

/// Reads stories from a local file (JSON Lines with a `text` field, or `<|endoftext|>`-separated text).
pub fn load_stories(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let is_jsonl = path
        .extension()
        .is_some_and(|e| e == "jsonl" || e == "json")
        || text.trim_start().starts_with('{');
    parse_stories(&text, is_jsonl, &path.display().to_string())
}

/// Parses stories from JSON Lines (`{"text": ...}`) or `<|endoftext|>`-separated text.
pub fn parse_stories(text: &str, jsonl: bool, what: &str) -> Result<Vec<String>> {
    let stories: Vec<String> = if jsonl {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                #[derive(Deserialize)]
                struct Row {
                    text: String,
                }
                serde_json::from_str::<Row>(l)
                    .map(|r| r.text)
                    .map_err(|e| Error::Data(format!("{what} line {}: {e}", i + 1)))
            })
            .collect::<Result<_>>()?
    } else {
        text.split("<|endoftext|>")
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    if stories.is_empty() {
        return Err(Error::Data(format!("{what} holds no stories")));
    }
    Ok(stories)
}

/// Downloads (or finds in the Hub cache) the validation stories of `roneneldan/TinyStories`.
pub fn load_stories_from_hub() -> Result<Vec<String>> {
    load_stories(&hub_valid_path()?)
}

/// Path of `TinyStories-valid.txt` in the Hub cache (`HF_HOME`), downloading it when missing
/// (`HF_HUB_OFFLINE=1`: the cache only).
pub fn hub_valid_path() -> Result<std::path::PathBuf> {
    let repo = hf_hub::Repo::new(HUB_DATASET.to_string(), hf_hub::RepoType::Dataset);
    let path = match hf_hub::Cache::from_env()
        .repo(repo.clone())
        .get(HUB_VALID_FILE)
    {
        Some(p) => p,
        None => hf_hub::api::sync::ApiBuilder::from_env()
            .with_progress(true)
            .build()
            .and_then(|api| api.repo(repo).get(HUB_VALID_FILE))
            .map_err(|e| Error::Hub(format!("cannot fetch {HUB_DATASET}/{HUB_VALID_FILE}: {e}\n  hint: pass a local copy with --data (JSON Lines of {{\"text\": ...}} or <|endoftext|>-separated text)")))?,
    };
    Ok(path)
}

/// The three task types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskType {
    /// Continue the story.
    Generative,
    /// Count the words.
    Syntactic,
    /// Extract the main idea or subject.
    Semantic,
}

impl TaskType {
    pub const ALL: [TaskType; 3] = [
        TaskType::Generative,
        TaskType::Syntactic,
        TaskType::Semantic,
    ];

    /// The paper's two instructions for this task (Table 7).
    pub fn instructions(self) -> [&'static str; 2] {
        match self {
            TaskType::Generative => [
                "How can the story be continued?",
                "Which could be a continuation of the story?",
            ],
            TaskType::Syntactic => [
                "How many words are in the story?",
                "Count the number of words in the story.",
            ],
            TaskType::Semantic => [
                "What is the main idea of the story?",
                "Who is the subject of the story?",
            ],
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            TaskType::Generative => "generative",
            TaskType::Syntactic => "syntactic",
            TaskType::Semantic => "semantic",
        }
    }
}

/// How instruction and story are combined (Section 5.2): the instruction before the story (base),
/// after it (reversed), or either way around a story whose words are shuffled (scrambled).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Template {
    /// Instruction, blank line, story.
    Base,
    /// Story, blank line, instruction.
    Reversed,
    /// Instruction, blank line, the story's words shuffled.
    Scrambled,
    /// The story's words shuffled, blank line, instruction.
    ScrambledReversed,
}

impl Template {
    pub fn name(self) -> &'static str {
        match self {
            Template::Base => "base",
            Template::Reversed => "reversed",
            Template::Scrambled => "scrambled",
            Template::ScrambledReversed => "scrambled_reversed",
        }
    }

    fn story_first(self) -> bool {
        matches!(self, Template::Reversed | Template::ScrambledReversed)
    }
}

/// One prompt of the task-type experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskPrompt {
    pub prompt: String,
    pub task: TaskType,
    pub template: Template,
    /// Which of the task's two instructions (Table 7): 0 or 1.
    pub phrasing: usize,
    pub story_index: usize,
}

/// The story's words (split on whitespace) in a random order, joined by single spaces.
pub fn scramble_words(story: &str, rng: &mut ChaCha8Rng) -> String {
    let mut words: Vec<&str> = story.split_whitespace().collect();
    words.shuffle(rng);
    words.join(" ")
}

/// The seeded word permutation of story `story_index`: one ChaCha stream per story, so a story
/// scrambles the same way whatever else is built.
fn story_rng(seed: u64, story_index: usize) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(story_index as u64);
    rng
}

fn join(template: Template, instruction: &str, story: &str) -> String {
    if template.story_first() {
        format!("{story}\n\n{instruction}")
    } else {
        format!("{instruction}\n\n{story}")
    }
}

/// The paper's task prompts (Section 5.2, Appendix B.2): `per_task` prompts for each task type.
///
/// Story `i` (of the first `per_task` stories) is asked all three task types, with the same template
/// and phrasing, so that story content cannot tell the classes apart. Templates cycle base,
/// reversed, scrambled over the stories; the instruction phrasing (Table 7) changes every three
/// stories, and a scrambled story goes after the instruction or before it in turn every six. A
/// scrambled story is the same permutation (seeded by `seed` and `i`) in the three tasks. Parts
/// are separated by a blank line. Order: story-major (generative, syntactic, semantic).
pub fn task_prompts(stories: &[String], per_task: usize, seed: u64) -> Result<Vec<TaskPrompt>> {
    if per_task == 0 {
        return Err(Error::invalid(
            "the task-type experiment needs at least one prompt per task",
        ));
    }
    if per_task > stories.len() {
        return Err(Error::invalid(format!(
            "{per_task} prompts per task need {per_task} stories but only {} are loaded; lower --n or load more stories with --data",
            stories.len()
        )));
    }
    let mut out = Vec::with_capacity(3 * per_task);
    for (i, story) in stories[..per_task].iter().enumerate() {
        let phrasing = (i / 3) % 2;
        let template = match i % 3 {
            0 => Template::Base,
            1 => Template::Reversed,
            _ if (i / 6) % 2 == 0 => Template::Scrambled,
            _ => Template::ScrambledReversed,
        };
        let text = match template {
            Template::Base | Template::Reversed => story.clone(),
            _ => scramble_words(story, &mut story_rng(seed, i)),
        };
        for task in TaskType::ALL {
            out.push(TaskPrompt {
                prompt: join(template, task.instructions()[phrasing], &text),
                task,
                template,
                phrasing,
                story_index: i,
            });
        }
    }
    Ok(out)
}

/// The authors' released prompt generator (`data_manager.py`, `--protocol authors`): for each
/// story, for each of the six instructions in Table 7's order, story + instruction, instruction +
/// story, then the story is scrambled *in place* (split on single spaces) and the same two layouts
/// follow; every prompt ends with a blank line, and the scrambled story carries over to the next
/// instructions. Prompts longer than 1,500 characters are skipped, as the authors' runner does.
/// Stories are taken in order until each task type has `per_task` prompts.
pub fn authors_task_prompts(
    stories: &[String],
    per_task: usize,
    seed: u64,
) -> Result<Vec<TaskPrompt>> {
    if per_task == 0 {
        return Err(Error::invalid(
            "the task-type experiment needs at least one prompt per task",
        ));
    }
    let mut counts = [0usize; 3];
    let mut out = Vec::new();
    for (i, original) in stories.iter().enumerate() {
        let mut rng = story_rng(seed, i);
        let mut story = original.clone();
        for (t, task) in TaskType::ALL.into_iter().enumerate() {
            for (phrasing, instruction) in task.instructions().into_iter().enumerate() {
                let mut emit = |template: Template, prompt: String| {
                    if prompt.chars().count() <= 1500 && counts[t] < per_task {
                        counts[t] += 1;
                        out.push(TaskPrompt {
                            prompt,
                            task,
                            template,
                            phrasing,
                            story_index: i,
                        });
                    }
                };
                emit(Template::Reversed, format!("{story}\n\n{instruction}\n\n"));
                emit(Template::Base, format!("{instruction}\n\n{story}\n\n"));
                let mut words: Vec<&str> = story.split(' ').collect();
                words.shuffle(&mut rng);
                story = words.join(" ");
                emit(
                    Template::ScrambledReversed,
                    format!("{story}\n\n{instruction}\n\n"),
                );
                emit(Template::Scrambled, format!("{instruction}\n\n{story}\n\n"));
            }
        }
        if counts.iter().all(|&c| c >= per_task) {
            return Ok(out);
        }
    }
    Err(Error::invalid(format!(
        "{} stories give only {}/{}/{} prompts (generative/syntactic/semantic) under 1,500 characters, fewer than the {per_task} per task asked for; lower --n or load more stories",
        stories.len(),
        counts[0],
        counts[1],
        counts[2]
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stories(n: usize) -> Vec<String> {
        (0..n)
            .map(|i| format!("Story {i} has some words.\n\nThe end of story {i}."))
            .collect()
    }

    #[test]
    fn paper_prompts_match_appendix_b2() {
        let s = stories(12);
        let p = task_prompts(&s, 12, 7).unwrap();
        assert_eq!(p.len(), 36);
        // Story 0: base template, first phrasing, the three tasks in order.
        assert_eq!(
            p[0].prompt,
            "How can the story be continued?\n\nStory 0 has some words.\n\nThe end of story 0."
        );
        assert_eq!(
            p[1].prompt,
            "How many words are in the story?\n\nStory 0 has some words.\n\nThe end of story 0."
        );
        assert_eq!(
            p[2].prompt,
            "What is the main idea of the story?\n\nStory 0 has some words.\n\nThe end of story 0."
        );
        // Story 1: reversed.
        assert_eq!(
            p[3].prompt,
            "Story 1 has some words.\n\nThe end of story 1.\n\nHow can the story be continued?"
        );
        assert_eq!(p[3].template, Template::Reversed);
        // Story 3: base with the second phrasings.
        assert_eq!(
            p[9].prompt,
            "Which could be a continuation of the story?\n\nStory 3 has some words.\n\nThe end of story 3."
        );
        assert_eq!(
            p[10].prompt,
            "Count the number of words in the story.\n\nStory 3 has some words.\n\nThe end of story 3."
        );
        assert_eq!(
            p[11].prompt,
            "Who is the subject of the story?\n\nStory 3 has some words.\n\nThe end of story 3."
        );
        // Story 2: instruction, then the scrambled story — the same permutation in all three tasks.
        let scrambled = |x: &TaskPrompt, ins: &str| x.prompt.strip_prefix(ins).unwrap().to_string();
        assert_eq!(p[6].template, Template::Scrambled);
        let s2 = scrambled(&p[6], "How can the story be continued?\n\n");
        assert_eq!(s2, scrambled(&p[7], "How many words are in the story?\n\n"));
        assert_ne!(s2, "Story 2 has some words. The end of story 2.");
        let mut words: Vec<&str> = s2.split(' ').collect();
        words.sort();
        let mut want: Vec<&str> = "Story 2 has some words. The end of story 2."
            .split(' ')
            .collect();
        want.sort();
        assert_eq!(words, want);
        // Seeded: the same seed gives the same text, another seed another permutation.
        assert_eq!(task_prompts(&s, 12, 7).unwrap(), p);
        assert_ne!(task_prompts(&s, 12, 8).unwrap()[6].prompt, p[6].prompt);
        // Story 8 is scrambled and goes before the instruction.
        assert_eq!(p[24].template, Template::ScrambledReversed);
        assert!(p[24]
            .prompt
            .ends_with("\n\nHow can the story be continued?"));
    }

    #[test]
    fn paper_prompts_are_balanced() {
        let p = task_prompts(&stories(60), 60, 1).unwrap();
        for task in TaskType::ALL {
            let mine: Vec<&TaskPrompt> = p.iter().filter(|x| x.task == task).collect();
            assert_eq!(mine.len(), 60);
            let count = |f: &dyn Fn(&TaskPrompt) -> bool| mine.iter().filter(|x| f(x)).count();
            assert_eq!(count(&|x| x.template == Template::Base), 20);
            assert_eq!(count(&|x| x.template == Template::Reversed), 20);
            assert_eq!(count(&|x| x.template == Template::Scrambled), 10);
            assert_eq!(count(&|x| x.template == Template::ScrambledReversed), 10);
            assert_eq!(count(&|x| x.phrasing == 0), 30);
        }
        assert!(task_prompts(&stories(5), 6, 1)
            .unwrap_err()
            .to_string()
            .contains("only 5"));
    }

    #[test]
    fn authors_prompts_follow_their_generator() {
        let s = vec!["one two three".to_string(), "four five six".to_string()];
        let p = authors_task_prompts(&s, 8, 3).unwrap();
        assert_eq!(p.len(), 24);
        assert_eq!(
            p[0].prompt,
            "one two three\n\nHow can the story be continued?\n\n"
        );
        assert_eq!(
            p[1].prompt,
            "How can the story be continued?\n\none two three\n\n"
        );
        assert!(p[2]
            .prompt
            .ends_with("\n\nHow can the story be continued?\n\n"));
        // The scrambled story carries over: the second instruction's "base" uses it.
        let carried = p[2].prompt.split("\n\n").next().unwrap().to_string();
        assert_eq!(
            p[4].prompt,
            format!("{carried}\n\nWhich could be a continuation of the story?\n\n")
        );
        assert_eq!(p.iter().filter(|x| x.task == TaskType::Semantic).count(), 8);
        assert_eq!(authors_task_prompts(&s, 16, 3).unwrap().len(), 48);
        assert!(authors_task_prompts(&s, 17, 3).is_err());
        // Prompts over 1,500 characters are skipped.
        let long = vec!["word ".repeat(400)];
        assert!(authors_task_prompts(&long, 1, 3).is_err());
    }

    #[test]
    fn loads_the_tinystories_sample_and_text_files() {
        let path = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR").expect("run through cargo"),
        )
        .join("data/tinystories_valid_sample.jsonl");
        let stories = load_stories(&path).unwrap();
        assert_eq!(stories.len(), 60);
        assert!(stories[0].starts_with("Spot. Spot saw the shiny car"));
        assert_eq!(sample_stories().unwrap(), stories);
        // The Hub's text form: stories separated by <|endoftext|>.
        let dir = tempfile::tempdir().unwrap();
        let txt = dir.path().join("valid.txt");
        let body = format!(
            "{}\n<|endoftext|>\n{}\n<|endoftext|>\n",
            stories[0], stories[1]
        );
        std::fs::write(&txt, body).unwrap();
        assert_eq!(load_stories(&txt).unwrap(), stories[..2].to_vec());
        let bad = dir.path().join("bad.jsonl");
        std::fs::write(&bad, "{\"story\": 1}\n").unwrap();
        assert!(load_stories(&bad)
            .unwrap_err()
            .to_string()
            .contains("line 1"));
    }
}
