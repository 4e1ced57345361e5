//! Reading a topic back as a user's tool would: from its beginning to the end it had when
//! the read started, and the public topics checked as analysts rely on them.

use std::collections::HashMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{BorrowedMessage, Headers, Message as _};
use recrawl_common::tail::{read_to_end, EndOffsets};
use recrawl_common::KafkaArgs;

use crate::python::check_jsonschema;
use crate::repository_file;

/// Hands every record of the topic `name` (prefix included), each partition to the end it
/// had when the read started, to `each`; past those ends, on while records keep coming
/// within a second, as a broker's high watermark can trail the last records of a batch
/// (tansu's does).
pub fn read_topic(kafka: &KafkaArgs, name: &str, mut each: impl FnMut(&BorrowedMessage<'_>)) {
    let reader: BaseConsumer =
        recrawl_common::kafka::reader_config(&kafka.cluster, "topic-check").create().expect("reader");
    let timeout = Duration::from_secs(30);
    let metadata = reader.fetch_metadata(Some(name), timeout).expect("metadata");
    let partitions = metadata.topics().first().map_or(0, |t| t.partitions().len() as i32);
    let (ends, assignment) = EndOffsets::fetch(&reader, name, 0..partitions, timeout, false).expect("ends");
    reader.assign(&assignment).expect("assign");
    read_to_end(&reader, ends, Duration::from_secs(1), timeout, |message| each(message))
        .expect("read to the end");
}

/// Reads `topic` (without prefix) to its end as raw bytes and checks that every value is
/// a JSON object whose `schema` is `schema` (`recrawl.<type>/<version>`), under the
/// headers `content-type: application/json` and `schema-version: <version>`, with a UTF-8
/// key (what Kafka Connect's `JsonConverter` and `StringConverter` need,
/// `docs/analysts.md`), and that valid against its published JSON Schema; returns the
/// records' keys and values.
pub fn plain_json_records(kafka: &KafkaArgs, topic: &str, schema: &str) -> Vec<(String, serde_json::Value)> {
    let name = kafka.cluster.topics().name(topic);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut files = Vec::new();
    let mut records = Vec::new();
    read_topic(kafka, &name, |message| {
        let key = message.key().and_then(|key| std::str::from_utf8(key).ok());
        let key = key.unwrap_or_else(|| panic!("{name}: key not UTF-8")).to_owned();
        let value = message.payload().unwrap_or_default();
        let json: serde_json::Value = serde_json::from_slice(value)
            .unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {}", String::from_utf8_lossy(value)));
        assert!(json.is_object() && value.first() == Some(&b'{'), "{name}: {json}");
        assert_eq!(json["schema"], schema, "{name}");
        let headers: HashMap<&str, &[u8]> = message
            .headers()
            .map(|h| h.iter().filter_map(|h| Some((h.key, h.value?))).collect())
            .unwrap_or_default();
        assert_eq!(headers.get("content-type").copied(), Some(&b"application/json"[..]), "{name}");
        let version = schema.rsplit('/').next().unwrap_or_default();
        assert_eq!(headers.get("schema-version").copied(), Some(version.as_bytes()), "{name}");
        let file = dir.path().join(format!("{}.json", files.len()));
        std::fs::write(&file, value).expect("record written");
        files.push(file);
        records.push((key, json));
    });
    let kebab = schema.trim_start_matches("recrawl.").split('/').next().unwrap_or_default();
    check_jsonschema(&repository_file(&format!("schemas/json/{kebab}.schema.json")), &files);
    records
}
