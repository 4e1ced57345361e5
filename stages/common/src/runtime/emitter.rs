//! What a stage hands its outputs and dead letters to.

use std::fmt::Display;

use recrawl_schemas::envelope::kafka_headers;
use recrawl_schemas::topics::Topic;
use recrawl_schemas::{encode, Message, TopicNames};

use super::dead_letters::{truncate_text, MAX_REASON_BYTES};
use super::errors::{DeadLetterKind, StageError};
use super::record::{InputRecord, OutputRecord};

/// Collects a stage's outputs for one batch or tick.
#[derive(Debug)]
pub struct Emitter {
    topics: TopicNames,
    stage: &'static str,
    max_record_bytes: usize,
    pub(super) records: Vec<OutputRecord>,
}

impl Emitter {
    pub(super) fn new(topics: TopicNames, stage: &'static str, max_record_bytes: usize) -> Self {
        Self { topics, stage, max_record_bytes, records: Vec::new() }
    }

    pub fn topics(&self) -> &TopicNames {
        &self.topics
    }

    /// Encodes `message` for `topic`, keyed as the topic keys it. A message its readers
    /// would refuse ([`Message::validate`]) goes to the dead-letter topic instead, as
    /// `unproducible` with the reason: once, from the stage that made it, and never to
    /// the analysts who read the topic with their own tools.
    pub fn send<M: Message>(&mut self, topic: Topic<M>, message: &M) -> Result<(), StageError> {
        let payload = encode(message)?;
        let topic_name = self.topics.name(topic.name);
        let key = topic.key(message).into_owned().into_bytes();
        if let Err(reason) = message.validate() {
            let reason = format!("an output no reader takes: {reason}");
            tracing::warn!(topic = %topic_name, %reason, "dead-lettering an output");
            self.records.push(OutputRecord::dead_letter(
                &self.topics,
                self.stage,
                &topic_name,
                None,
                &key,
                Some(&payload),
                DeadLetterKind::Unproducible,
                &reason,
                self.max_record_bytes,
            ));
            return Ok(());
        }
        let headers = kafka_headers::<M>().map(|(name, value)| (name, value.into_bytes())).into();
        self.records.push(OutputRecord {
            topic: topic_name,
            key,
            payload: Some(payload),
            headers,
            partition: None,
            dead_letter: None,
        });
        Ok(())
    }

    /// Sends `record`'s key and bytes (its first bytes, if too large) to the dead-letter
    /// topic, with the reason and origin in headers.
    pub fn dead_letter(&mut self, record: &InputRecord, kind: DeadLetterKind, reason: impl Display) {
        let reason = reason.to_string();
        tracing::warn!(
            topic = %record.topic,
            partition = record.partition,
            offset = record.offset,
            bytes = record.payload_len(),
            kind = kind.as_str(),
            reason = %truncate_text(&reason, MAX_REASON_BYTES),
            "dead-lettering input"
        );
        self.records.push(OutputRecord::dead_letter(
            &self.topics,
            self.stage,
            &record.topic,
            Some((record.partition, record.offset)),
            record.key.as_deref().unwrap_or_default(),
            record.payload.as_deref(),
            kind,
            &reason,
            self.max_record_bytes,
        ));
    }

    /// Decodes `record` as `topic`'s message and checks that its Kafka key is the one the
    /// topic gives that message; otherwise dead-letters it with the reason.
    pub fn decode_keyed<M: Message>(&mut self, record: &InputRecord, topic: Topic<M>) -> Option<M> {
        match record.decode(topic) {
            Ok(message) if record.key_str() == Some(&*topic.key(&message)) => Some(message),
            Ok(message) => {
                let key = record.key_str().map(|key| truncate_text(key, 200));
                let reason = format!(
                    "key {key:?} is not the {}'s {:?}",
                    M::NAME,
                    truncate_text(&topic.key(&message), 200)
                );
                self.dead_letter(record, DeadLetterKind::KeyMismatch, reason);
                None
            }
            Err(error) => {
                self.dead_letter(record, error.kind(), error);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use recrawl_schemas::topics::FETCH;
    use recrawl_schemas::PagePick;

    use recrawl_schemas::topics::dead_letter_headers;

    use super::*;
    use crate::runtime::dead_letters::{DEAD_LETTER_HEADROOM, DEAD_LETTER_KEPT_BYTES};

    fn header<'a>(record: &'a OutputRecord, name: &str) -> Option<&'a str> {
        record.headers.iter().find(|(n, _)| *n == name).and_then(|(_, v)| std::str::from_utf8(v).ok())
    }

    #[test]
    fn every_bad_input_is_dead_lettered_with_its_kind_and_origin() {
        let mut out = Emitter::new(TopicNames::new("p."), "fetch", 1 << 20);
        let pick = PagePick::discovery("http://example.com/a.html", 42).unwrap();
        let good = encode(&pick).unwrap();
        let mut future = good.clone();
        future[3] = 9;
        let mut long_url = pick.clone();
        long_url.url = format!("http://h/{}", "a".repeat(9000));
        let cases = [
            (None, DeadLetterKind::Undecodable),
            (Some(Vec::new()), DeadLetterKind::Undecodable),
            (Some(b"random bytes".to_vec()), DeadLetterKind::Undecodable),
            (Some(good[..good.len() - 2].to_vec()), DeadLetterKind::Undecodable),
            (Some(future), DeadLetterKind::SchemaVersion),
            (Some(encode(&long_url).unwrap()), DeadLetterKind::Invalid),
            (Some(good), DeadLetterKind::KeyMismatch),
        ];
        for (payload, kind) in cases {
            let decoded = out.decode_keyed(&InputRecord::sample(payload), FETCH);
            assert!(decoded.is_none());
            let letter = out.records.last().unwrap();
            assert_eq!(header(letter, dead_letter_headers::KIND), Some(kind.as_str()));
            assert_eq!(header(letter, dead_letter_headers::TOPIC), Some("p.fetch"));
            assert_eq!(header(letter, dead_letter_headers::OFFSET), Some("41"));
            assert_eq!(letter.topic, "p.dead-letter");
        }
        assert_eq!(out.records.len(), 7);
    }

    #[test]
    fn an_output_its_readers_would_refuse_is_dead_lettered_by_its_maker() {
        let mut out = Emitter::new(TopicNames::new("p."), "scheduler", 1 << 20);
        let pick = PagePick::discovery("http://example.com/a.html", 42).unwrap();
        out.send(FETCH, &pick).unwrap();
        let forged = PagePick { score: f64::NAN, ..pick };
        out.send(FETCH, &forged).unwrap();
        assert_eq!(out.records.len(), 2);
        assert_eq!((out.records[0].topic.as_str(), out.records[0].dead_letter.is_none()), ("p.fetch", true));
        let letter = &out.records[1];
        assert_eq!(letter.topic, "p.dead-letter");
        assert_eq!(header(letter, dead_letter_headers::KIND), Some("unproducible"));
        assert_eq!(header(letter, dead_letter_headers::TOPIC), Some("p.fetch"));
        assert_eq!(header(letter, dead_letter_headers::STAGE), Some("scheduler"));
        assert!(header(letter, dead_letter_headers::REASON).is_some_and(|reason| reason.contains("score")));
        assert_eq!(letter.payload, Some(encode(&forged).unwrap()));
    }

    #[test]
    fn a_value_too_large_keeps_its_first_bytes_and_its_size() {
        let mut out = Emitter::new(TopicNames::new("p."), "diff", 1 << 20);
        let huge = vec![7u8; 5 << 20];
        out.dead_letter(&InputRecord::sample(Some(huge)), DeadLetterKind::Undecodable, "x".repeat(5000));
        let letter = &out.records[0];
        assert_eq!(letter.payload.as_ref().map(Vec::len), Some(DEAD_LETTER_KEPT_BYTES));
        assert_eq!(header(letter, dead_letter_headers::ORIGINAL_BYTES), Some("5242880"));
        assert_eq!(header(letter, dead_letter_headers::TRUNCATED), Some("true"));
        assert_eq!(header(letter, dead_letter_headers::REASON).map(str::len), Some(MAX_REASON_BYTES));
        assert!(letter.size() < (1 << 20) - DEAD_LETTER_HEADROOM);
        // One that fits is kept whole.
        out.dead_letter(&InputRecord::sample(Some(vec![1; 1000])), DeadLetterKind::Invalid, "bad");
        assert_eq!(out.records[1].payload.as_ref().map(Vec::len), Some(1000));
        assert_eq!(header(&out.records[1], dead_letter_headers::TRUNCATED), None);
        assert!(!out.records[1].shorten(), "nothing to cut");
        // One that fits the stage's records but that the dead-letter topic refuses is
        // tried again with its first bytes, once.
        out.dead_letter(&InputRecord::sample(Some(vec![2; 200 << 10])), DeadLetterKind::Invalid, "bad");
        let letter = &mut out.records[2];
        assert_eq!(header(letter, dead_letter_headers::TRUNCATED), None);
        assert!(letter.shorten());
        assert_eq!(letter.payload.as_ref().map(Vec::len), Some(DEAD_LETTER_KEPT_BYTES));
        assert_eq!(header(letter, dead_letter_headers::ORIGINAL_BYTES), Some("204800"));
        assert_eq!(header(letter, dead_letter_headers::TRUNCATED), Some("true"));
        assert!(!letter.shorten(), "once");
    }
}
