//! Dead letters: a record no stage can take, kept with its reason and origin.

use recrawl_schemas::topics::{dead_letter_headers, DEAD_LETTER};
use recrawl_schemas::TopicNames;

use super::errors::DeadLetterKind;
use super::record::OutputRecord;

/// Room a dead letter keeps within `--max-record-bytes` for its key and headers.
pub(super) const DEAD_LETTER_HEADROOM: usize = 64 << 10;
/// How much of a value too large to dead-letter whole is kept.
pub(super) const DEAD_LETTER_KEPT_BYTES: usize = 64 << 10;
/// Longest reason text a dead letter carries.
pub(super) const MAX_REASON_BYTES: usize = 1024;

impl OutputRecord {
    /// A dead letter of `key` and `value` that belong on `topic` (read from `at`, the
    /// partition and offset, for inputs). A value that would not fit in a record of
    /// `max_record_bytes` keeps only its first bytes; the size header says how large it was.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dead_letter(
        names: &TopicNames,
        stage: &str,
        topic: &str,
        at: Option<(i32, i64)>,
        key: &[u8],
        value: Option<&[u8]>,
        kind: DeadLetterKind,
        reason: &str,
        max_record_bytes: usize,
    ) -> Self {
        let room = max_record_bytes.saturating_sub(DEAD_LETTER_HEADROOM);
        let value = value.unwrap_or_default();
        let mut headers = vec![
            (dead_letter_headers::REASON, truncate_text(reason, MAX_REASON_BYTES).into_bytes()),
            (dead_letter_headers::KIND, kind.as_str().as_bytes().to_vec()),
            (dead_letter_headers::STAGE, stage.as_bytes().to_vec()),
            (dead_letter_headers::TOPIC, topic.as_bytes().to_vec()),
            (dead_letter_headers::ORIGINAL_BYTES, value.len().to_string().into_bytes()),
        ];
        if let Some((partition, offset)) = at {
            headers.push((dead_letter_headers::PARTITION, partition.to_string().into_bytes()));
            headers.push((dead_letter_headers::OFFSET, offset.to_string().into_bytes()));
        }
        let kept = |bytes: &[u8]| bytes[..bytes.len().min(room)].to_vec();
        let mut letter = Self {
            topic: names.name(DEAD_LETTER),
            key: kept(key),
            payload: Some(kept(value)),
            headers,
            partition: None,
            dead_letter: Some((kind, topic.to_owned())),
        };
        if value.len().saturating_add(key.len()) > room {
            letter.shorten();
        }
        letter
    }

    /// Keeps only the first [`DEAD_LETTER_KEPT_BYTES`] of this dead letter's key and value
    /// and says so in a header; false if it had no more than that.
    pub(super) fn shorten(&mut self) -> bool {
        let payload_len = self.payload.as_ref().map_or(0, Vec::len);
        if self.key.len().max(payload_len) <= DEAD_LETTER_KEPT_BYTES {
            return false;
        }
        self.key.truncate(DEAD_LETTER_KEPT_BYTES);
        if let Some(payload) = &mut self.payload {
            payload.truncate(DEAD_LETTER_KEPT_BYTES);
        }
        self.headers.push((dead_letter_headers::TRUNCATED, b"true".to_vec()));
        true
    }
}

/// `text` cut to at most `max` bytes on a character boundary.
pub(super) fn truncate_text(text: &str, max: usize) -> String {
    let mut end = text.len().min(max);
    // Index 0 is always a boundary, so this stops there at the latest.
    while !text.is_char_boundary(end) {
        end = end.saturating_sub(1);
    }
    text[..end].to_owned()
}
