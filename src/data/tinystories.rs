//! TinyStories and the paper's task-type prompts (Section 5.2, Appendix B.2): a generative,
//! syntactic or semantic instruction combined with a story in a base, reversed or scrambled
//! template.
//!
//! Stories load from a local JSON Lines file (`{"text": ...}` per line), a text file with stories
//! separated by `<|endoftext|>`, or the Hub dataset `roneneldan/TinyStories`.

use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The Hub dataset and its validation text file.
pub const HUB_DATASET: &str = "roneneldan/TinyStories";
pub const HUB_VALID_FILE: &str = "TinyStories-valid.txt";

/// Reads stories from a local file (JSON Lines with a `text` field, or `<|endoftext|>`-separated text).
pub fn load_stories(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    let is_jsonl = path
        .extension()
        .is_some_and(|e| e == "jsonl" || e == "json")
        || text.trim_start().starts_with('{');
    let stories: Vec<String> = if is_jsonl {
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
                    .map_err(|e| Error::Data(format!("{} line {}: {e}", path.display(), i + 1)))
            })
            .collect::<Result<_>>()?
    } else {
        text.split("<|endoftext|>")
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    };
    if stories.is_empty() {
        return Err(Error::Data(format!("{} holds no stories", path.display())));
    }
    Ok(stories)
}

/// Downloads (or finds in the Hub cache) the validation stories of `roneneldan/TinyStories`.
pub fn load_stories_from_hub() -> Result<Vec<String>> {
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
            .map_err(|e| Error::Hub(format!("cannot fetch {HUB_DATASET}/{HUB_VALID_FILE}: {e}")))?,
    };
    load_stories(&path)
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

/// How instruction and story are combined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Template {
    /// Instruction, then story.
    Base,
    /// Story, then instruction.
    Reversed,
    /// Instruction, then the story's words shuffled.
    ScrambledAfter,
    /// The story's words shuffled, then instruction.
    ScrambledBefore,
}

/// One prompt of the task-type experiment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskPrompt {
    pub prompt: String,
    pub task: TaskType,
    pub template: Template,
    pub story_index: usize,
}

fn scramble(story: &str, rng: &mut ChaCha8Rng) -> String {
    let mut words: Vec<&str> = story.split_whitespace().collect();
    words.shuffle(rng);
    words.join(" ")
}

/// `per_task` prompts for each task type, balanced over the templates (base, reversed,
/// scrambled — the last alternating instruction-first and story-first) and over the two
/// instructions, each using a different story (cycling through `stories`).
pub fn task_prompts(stories: &[String], per_task: usize, seed: u64) -> Result<Vec<TaskPrompt>> {
    if stories.is_empty() {
        return Err(Error::invalid("no stories to build prompts from"));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(3 * per_task);
    let mut story = 0usize;
    for task in TaskType::ALL {
        for i in 0..per_task {
            let instruction = task.instructions()[(i / 3) % 2];
            let template = match i % 3 {
                0 => Template::Base,
                1 => Template::Reversed,
                _ if (i / 3) % 2 == 0 => Template::ScrambledAfter,
                _ => Template::ScrambledBefore,
            };
            let s = &stories[story % stories.len()];
            let prompt = match template {
                Template::Base => format!("{instruction}\n\n{s}"),
                Template::Reversed => format!("{s}\n\n{instruction}"),
                Template::ScrambledAfter => format!("{instruction}\n\n{}", scramble(s, &mut rng)),
                Template::ScrambledBefore => format!("{}\n\n{instruction}", scramble(s, &mut rng)),
            };
            out.push(TaskPrompt {
                prompt,
                task,
                template,
                story_index: story % stories.len(),
            });
            story += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_balanced() {
        let stories: Vec<String> = (0..50)
            .map(|i| format!("Story {i} has some words here."))
            .collect();
        let p = task_prompts(&stories, 12, 1).unwrap();
        assert_eq!(p.len(), 36);
        for task in TaskType::ALL {
            let mine: Vec<&TaskPrompt> = p.iter().filter(|x| x.task == task).collect();
            assert_eq!(mine.len(), 12);
            assert_eq!(
                mine.iter().filter(|x| x.template == Template::Base).count(),
                4
            );
            assert_eq!(
                mine.iter()
                    .filter(|x| x.template == Template::Reversed)
                    .count(),
                4
            );
            let scrambled = mine
                .iter()
                .filter(|x| {
                    matches!(
                        x.template,
                        Template::ScrambledAfter | Template::ScrambledBefore
                    )
                })
                .count();
            assert_eq!(scrambled, 4);
            for ins in task.instructions() {
                assert!(mine.iter().any(|x| x.prompt.contains(ins)));
            }
        }
        assert!(p[0]
            .prompt
            .starts_with("How can the story be continued?\n\nStory 0"));
        assert!(p[1].prompt.ends_with("How can the story be continued?"));
    }

    #[test]
    fn loads_the_tinystories_sample_and_text_files() {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("data/tinystories_valid_sample.jsonl");
        let stories = load_stories(&path).unwrap();
        assert_eq!(stories.len(), 60);
        assert!(stories[0].starts_with("Spot. Spot saw the shiny car"));
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
