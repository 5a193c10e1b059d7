//! The topic-format dataset of the paper's Section 5.3 and Appendix B.4: a format instruction
//! (poem, scientific piece, chat log) followed by a topic, e.g. "Write a poem about a volcano".
//!
//! The topic list is ours (`data/topics.txt`, 150 topics, one per line; embedded in the library so
//! it works from anywhere); any other list loads with [`load_topics`].

// User input reaches this module (issue 10): no unwrap or expect outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The 150 topics committed in `data/topics.txt`.
pub const DEFAULT_TOPICS: &str = include_str!("../../data/topics.txt");

/// The three output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputFormat {
    Poem,
    Scientific,
    ChatLog,
}

impl OutputFormat {
    pub const ALL: [OutputFormat; 3] = [
        OutputFormat::Poem,
        OutputFormat::Scientific,
        OutputFormat::ChatLog,
    ];

    /// The instruction that precedes the topic (Appendix B.4), with its trailing space.
    pub fn prefix(self) -> &'static str {
        match self {
            OutputFormat::Poem => "Write a poem about ",
            OutputFormat::Scientific => "Write a scientific piece about ",
            OutputFormat::ChatLog => "Simulate a chat log about ",
        }
    }

    /// The class label used in records and results.
    pub fn name(self) -> &'static str {
        match self {
            OutputFormat::Poem => "poem",
            OutputFormat::Scientific => "scientific",
            OutputFormat::ChatLog => "chat_log",
        }
    }

    /// The prompt for `topic`.
    pub fn prompt(self, topic: &str) -> String {
        format!("{}{topic}", self.prefix())
    }
}

/// One prompt of the topic-format dataset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FormatPrompt {
    pub prompt: String,
    pub format: OutputFormat,
    pub topic: String,
    /// Index of the topic in the topic list.
    pub topic_index: usize,
}

/// Parses a topic list: one topic per line; blank lines and lines starting with `#` are skipped.
pub fn parse_topics(text: &str) -> Result<Vec<String>> {
    let topics: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    if topics.is_empty() {
        return Err(Error::Data("the topic list is empty".into()));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(dup) = topics.iter().find(|t| !seen.insert(t.as_str())) {
        return Err(Error::Data(format!(
            "topic {dup:?} appears twice in the topic list; topics must be distinct"
        )));
    }
    Ok(topics)
}

/// The committed 150 topics.
pub fn default_topics() -> Vec<String> {
    // The embedded list is checked by a test; it cannot fail to parse.
    parse_topics(DEFAULT_TOPICS).unwrap_or_default()
}

/// Reads a topic list from a text file (one topic per line).
pub fn load_topics(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    parse_topics(&text).map_err(|e| Error::Data(format!("{}: {e}", path.display())))
}

/// The first `n_topics` topics, each in the three formats: topic-major order (topic 1 as poem,
/// scientific piece, chat log; then topic 2; …), so every prefix of the list is balanced.
pub fn format_prompts(topics: &[String], n_topics: usize) -> Result<Vec<FormatPrompt>> {
    if n_topics == 0 {
        return Err(Error::invalid(
            "the topic-format dataset needs at least one topic",
        ));
    }
    if n_topics > topics.len() {
        return Err(Error::invalid(format!(
            "{n_topics} topics asked for but the list has {}; lower --n or pass a longer list with --data",
            topics.len()
        )));
    }
    Ok(topics[..n_topics]
        .iter()
        .enumerate()
        .flat_map(|(i, topic)| {
            OutputFormat::ALL
                .into_iter()
                .map(move |format| FormatPrompt {
                    prompt: format.prompt(topic),
                    format,
                    topic: topic.clone(),
                    topic_index: i,
                })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_topics_are_150_distinct() {
        let t = parse_topics(DEFAULT_TOPICS).unwrap();
        assert_eq!(t.len(), 150);
        assert_eq!(t[0], "a volcano");
        assert_eq!(default_topics(), t);
    }

    #[test]
    fn prompts_match_appendix_b4() {
        let topics = vec!["a planet".to_string(), "friendship".to_string()];
        let p = format_prompts(&topics, 2).unwrap();
        let texts: Vec<&str> = p.iter().map(|x| x.prompt.as_str()).collect();
        assert_eq!(
            texts,
            [
                "Write a poem about a planet",
                "Write a scientific piece about a planet",
                "Simulate a chat log about a planet",
                "Write a poem about friendship",
                "Write a scientific piece about friendship",
                "Simulate a chat log about friendship",
            ]
        );
        assert_eq!(p[4].format, OutputFormat::Scientific);
        assert_eq!(p[4].topic_index, 1);
        assert!(format_prompts(&topics, 3)
            .unwrap_err()
            .to_string()
            .contains("list has 2"));
        assert!(parse_topics("a\n\n# note\nb\na\n")
            .unwrap_err()
            .to_string()
            .contains("twice"));
    }
}
