//! Generated documentation of the wire contract: a JSON Schema per message type and an
//! AsyncAPI 3 document for every topic of the catalogue. The files are committed under
//! `schemas/`; a test fails when they are stale (`RECRAWL_BLESS=1 cargo test -p
//! recrawl-schemas` rewrites them).

use schemars::{schema_for, JsonSchema};
use serde_json::{json, Map, Value};

use crate::envelope::{
    kafka_headers, kebab_name, schema_tag, Format, Message, MAGIC, SCHEMA_FIELD, SCHEMA_VERSION,
};
use crate::messages::*;
use crate::topics::{dead_letter_headers, TopicCatalogue, DEAD_LETTER_KINDS, DEFAULT_TOPIC_PREFIX};

/// Path of a message's JSON Schema relative to the `schemas/` directory.
pub fn schema_path(type_name: &str) -> String {
    format!("json/{}.schema.json", kebab_name(type_name))
}

struct Described {
    name: &'static str,
    format: Format,
    version: u16,
    /// The Kafka headers `encode`'s records carry.
    headers: [(&'static str, String); 2],
    schema: Value,
}

/// JSON Schema 2020-12's own formats; schemars also writes Rust's numeric types
/// (`uint64`, `double`, …) as formats, which validators do not know.
const STANDARD_FORMATS: [&str; 19] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "idn-email",
    "hostname",
    "idn-hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uri-reference",
    "iri",
    "iri-reference",
    "uuid",
    "uri-template",
    "json-pointer",
    "relative-json-pointer",
    "regex",
];

/// Makes a public message's schema strict: every listed property required and no other,
/// at any depth, and standard formats only.
fn strict(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if object.get("format").and_then(Value::as_str).is_some_and(|f| !STANDARD_FORMATS.contains(&f)) {
                object.remove("format");
            }
            // Every field is always written (null when absent): all are required.
            if let Some(Value::Object(properties)) = object.get("properties") {
                let names = properties.keys().map(|name| Value::String(name.clone())).collect();
                object.insert("required".to_owned(), Value::Array(names));
                object.insert("additionalProperties".to_owned(), Value::Bool(false));
            }
            object.values_mut().for_each(strict);
        }
        Value::Array(items) => items.iter_mut().for_each(strict),
        _ => {}
    }
}

fn describe<M: Message + JsonSchema>() -> Described {
    let mut schema = serde_json::to_value(schema_for!(M)).unwrap_or(Value::Null);
    if M::FORMAT == Format::Json {
        strict(&mut schema);
        // The tag `encode` writes first: part of the object a reader sees.
        let tag = schema_tag::<M>();
        let property = json!({
            "description": "The message type and schema version; also in the schema-version header.",
            "type": "string",
            "const": tag,
        });
        let mut properties = Map::new();
        properties.insert(SCHEMA_FIELD.to_owned(), property);
        if let Some(Value::Object(rest)) = schema.get_mut("properties").map(std::mem::take) {
            properties.extend(rest);
        }
        schema["properties"] = Value::Object(properties);
        if let Some(Value::Array(required)) = schema.get_mut("required") {
            required.insert(0, json!(SCHEMA_FIELD));
        }
    }
    Described { name: M::NAME, format: M::FORMAT, version: M::VERSION, headers: kafka_headers::<M>(), schema }
}

fn message_types() -> Vec<Described> {
    vec![
        describe::<PagePick>(),
        describe::<FetchResult>(),
        describe::<DiscoveredLinks>(),
        describe::<PageAnnouncement>(),
        describe::<ChangeEvent>(),
        describe::<PageEstimate>(),
        describe::<GroupDistribution>(),
        describe::<HostTrust>(),
    ]
}

fn pretty(value: &Value) -> String {
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

/// Every generated file as (path relative to `schemas/`, contents).
pub fn generated_files(catalogue: &TopicCatalogue) -> Vec<(String, String)> {
    let types = message_types();
    let mut files: Vec<(String, String)> =
        types.iter().map(|t| (schema_path(t.name), pretty(&t.schema))).collect();
    files.push(("asyncapi.json".to_owned(), pretty(&asyncapi(catalogue, &types))));
    files
}

fn asyncapi(catalogue: &TopicCatalogue, types: &[Described]) -> Value {
    let mut channels = Map::new();
    let mut operations = Map::new();
    let mut messages = Map::new();
    for topic in &catalogue.topics {
        let address = format!("{DEFAULT_TOPIC_PREFIX}{}", topic.name);
        let mut topic_configuration = json!({
            "cleanup.policy": [topic.cleanup_policy.as_str()],
            "max.message.bytes": catalogue.max_message_bytes,
        });
        if let Some(retention) = topic.retention_ms {
            topic_configuration["retention.ms"] = json!(retention);
        }
        let described = types.iter().find(|t| t.name == topic.payload);
        let message = match described {
            Some(t) => {
                let headers: Map<String, Value> = header_schema(t);
                let summary = match t.format {
                    Format::Json => format!(
                        "{}: one JSON object, nothing before it; its first field `{SCHEMA_FIELD}` names the type and schema version ({}). Readers also take the records of the type's earlier schemas (their shapes under json/v1/ and on): plain JSON, or for schema 1 the envelope [0x{MAGIC:02x}, format, 0, 1] before a bincode (format {}) or JSON (format {}) body.",
                        t.name, t.version, Format::Bincode as u8, Format::Json as u8,
                    ),
                    Format::Bincode => format!(
                        "{} in a recrawl envelope: bytes [0x{MAGIC:02x}, {}, {}, {}] then the bincode body.",
                        t.name, Format::Bincode as u8, t.version >> 8, t.version & 0xff,
                    ),
                };
                json!({
                    "name": t.name,
                    "contentType": t.format.framing().content_type(),
                    "summary": summary,
                    "payload": { "$ref": format!("./{}", schema_path(t.name)) },
                    "headers": { "type": "object", "properties": headers },
                })
            }
            None if topic.payload == "raw" => json!({
                "name": "DeadLetter",
                "contentType": "application/octet-stream",
                "summary": "The original message's bytes, unchanged.",
                "payload": { "type": "string", "format": "binary" },
                "headers": { "type": "object", "properties": {
                    dead_letter_headers::REASON: { "type": "string", "description": "why the stage rejected the message" },
                    dead_letter_headers::KIND: { "type": "string", "enum": DEAD_LETTER_KINDS, "description": "the kind of reason" },
                    dead_letter_headers::STAGE: { "type": "string", "description": "the stage that rejected it" },
                    dead_letter_headers::TOPIC: { "type": "string", "description": "the topic the message belongs on: read from, or meant for when the broker refused it" },
                    dead_letter_headers::PARTITION: { "type": "string", "description": "partition it was read from (inputs only)" },
                    dead_letter_headers::OFFSET: { "type": "string", "description": "offset it was read from (inputs only)" },
                    dead_letter_headers::ORIGINAL_BYTES: { "type": "string", "description": "size of the original value in bytes" },
                    dead_letter_headers::TRUNCATED: { "type": "string", "description": "\"true\" when only the value's first bytes are kept" },
                }},
            }),
            None => json!({
                "name": topic.payload,
                "contentType": Format::Bincode.framing().content_type(),
                "summary": format!("{}: a stage's internal state in a recrawl bincode envelope; not a public contract. A null value deletes the key.", topic.payload),
                "payload": { "type": "string", "format": "binary" },
            }),
        };
        let message_name = message["name"].as_str().unwrap_or(&topic.payload).to_owned();
        let mut message = message;
        message["bindings"] = json!({ "kafka": { "key": { "type": "string", "description": topic.key }, "bindingVersion": "0.5.0" } });
        messages.insert(message_name.clone(), message);
        channels.insert(
            topic.name.clone(),
            json!({
                "address": address,
                "description": topic.description,
                "messages": { message_name.clone(): { "$ref": format!("#/components/messages/{message_name}") } },
                "bindings": { "kafka": {
                    "topic": address,
                    "partitions": topic.partitions,
                    "replicas": catalogue.replication_factor,
                    "topicConfiguration": topic_configuration,
                    "bindingVersion": "0.5.0",
                }},
            }),
        );
        for (action, parties) in [("send", &topic.producers), ("receive", &topic.consumers)] {
            for party in parties {
                operations.insert(
                    format!("{party}-{action}s-{}", topic.name),
                    json!({ "action": action, "channel": { "$ref": format!("#/channels/{}", topic.name) } }),
                );
            }
        }
    }
    json!({
        "asyncapi": "3.0.0",
        "info": {
            "title": "recrawl",
            "version": SCHEMA_VERSION.to_string(),
            "description": "The Kafka topics of the recrawl pipeline. Addresses use the default prefix `recrawl.`; every stage takes --topic-prefix. Generated from deploy/topics.toml and the message types; do not edit.",
        },
        "channels": channels,
        "operations": operations,
        "components": { "messages": messages },
    })
}

fn header_schema(described: &Described) -> Map<String, Value> {
    described
        .headers
        .iter()
        .map(|(name, value)| ((*name).to_owned(), json!({ "type": "string", "const": value })))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::envelope::{decode, encode};
    use crate::messages::samples;
    use crate::topics::{
        Topic, ANNOUNCEMENTS, CHANGE_EVENTS, DISTRIBUTIONS, ESTIMATES, FETCH, FETCH_RESULTS, HOST_TRUST,
        LINKS,
    };

    fn schemas_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    fn bless() -> bool {
        std::env::var_os("RECRAWL_BLESS").is_some()
    }

    #[test]
    fn kebab_names() {
        assert_eq!(kebab_name("PagePick"), "page-pick");
        assert_eq!(schema_path("GroupDistribution"), "json/group-distribution.schema.json");
    }

    #[test]
    fn generated_schemas_and_asyncapi_are_current() {
        let mut stale = Vec::new();
        for (path, contents) in generated_files(&TopicCatalogue::builtin()) {
            let file = schemas_dir().join(&path);
            if bless() {
                std::fs::create_dir_all(file.parent().unwrap()).unwrap();
                std::fs::write(&file, &contents).unwrap();
            } else if std::fs::read_to_string(&file).ok().as_deref() != Some(contents.as_str()) {
                stale.push(path);
            }
        }
        assert!(
            stale.is_empty(),
            "stale generated files {stale:?}: run RECRAWL_BLESS=1 cargo test -p recrawl-schemas"
        );
    }

    #[test]
    fn asyncapi_describes_every_topic_with_its_policy() {
        let catalogue = TopicCatalogue::builtin();
        let doc = asyncapi(&catalogue, &message_types());
        for topic in &catalogue.topics {
            let binding = &doc["channels"][&topic.name]["bindings"]["kafka"];
            assert_eq!(binding["partitions"], json!(topic.partitions), "{}", topic.name);
            assert_eq!(
                binding["topicConfiguration"]["cleanup.policy"][0],
                json!(topic.cleanup_policy.as_str())
            );
        }
        let event = &doc["components"]["messages"]["ChangeEvent"];
        assert_eq!(event["contentType"], json!("application/json"));
        assert_eq!(event["payload"]["$ref"], json!("./json/change-event.schema.json"));
    }

    /// Each typed topic carries the payload type and keys records by the fields that
    /// `deploy/topics.toml` documents (`group/partition`: both, joined by a slash).
    #[test]
    fn typed_topics_agree_with_the_catalogue() {
        fn check<M: Message>(topic: Topic<M>, sample: &M) {
            let catalogue = TopicCatalogue::builtin();
            let spec = catalogue.get(topic.name).unwrap();
            assert_eq!(spec.payload, M::NAME, "{}", topic.name);
            let fields = serde_json::to_value(sample).unwrap();
            let documented: Vec<String> = spec
                .key
                .split('/')
                .map(|path| match path.split('.').fold(&fields, |value, field| &value[field]) {
                    serde_json::Value::String(text) => text.clone(),
                    serde_json::Value::Null => panic!("{}: no field {path}", topic.name),
                    other => other.to_string(),
                })
                .collect();
            assert_eq!(topic.key(sample), documented.join("/"), "{}", topic.name);
        }
        check(FETCH, &samples::page_pick());
        check(FETCH_RESULTS, &samples::fetch_result());
        check(LINKS, &samples::discovered_links());
        check(ANNOUNCEMENTS, &samples::page_announcement());
        check(CHANGE_EVENTS, &samples::change_event());
        check(ESTIMATES, &samples::page_estimate());
        check(DISTRIBUTIONS, &samples::group_distribution());
        check(HOST_TRUST, &samples::host_trust());
    }

    /// Decodes the committed encodings of every schema version a type reads: a change
    /// that breaks reading what is already on the topics fails here. `v1/<name>.bin` is the
    /// envelope schema 1 wrote for every type of its day, `v1/<name>.json` schema 1's plain JSON; a
    /// type's current encoding is under its own version, `.json` for the types people read.
    #[test]
    fn golden_fixtures_decode() {
        fn check<M: Message + PartialEq + std::fmt::Debug>(sample: M) {
            let fixture = |version: u16, extension: &str| {
                schemas_dir().join(format!("fixtures/v{version}/{}.{extension}", kebab_name(M::NAME)))
            };
            // Every version of a type people read is plain JSON; of an internal one, bincode.
            let extension = match M::FORMAT {
                Format::Bincode => "bin",
                Format::Json => "json",
            };
            let current = fixture(M::VERSION, extension);
            if bless() {
                std::fs::create_dir_all(current.parent().unwrap()).unwrap();
                std::fs::write(&current, encode(&sample).unwrap()).unwrap();
            }
            let earlier = (1..M::VERSION).map(|version| fixture(version, extension));
            // Types added since schema 1 (its envelope was bincode for all) have no such record.
            let schema_1 =
                (![PageAnnouncement::NAME, HostTrust::NAME].contains(&M::NAME)).then(|| fixture(1, "bin"));
            for path in [Some(current.clone()), schema_1].into_iter().flatten().chain(earlier) {
                let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!(decode::<M>(&bytes).unwrap(), sample, "{}", path.display());
            }
            let bytes = std::fs::read(&current).unwrap();
            assert_eq!(encode(&sample).unwrap(), bytes, "{} encodes differently now", M::NAME);
        }
        check(samples::page_pick());
        check(samples::fetch_result());
        check(samples::discovered_links());
        check(samples::page_announcement());
        check(samples::change_event());
        check(samples::page_estimate());
        check(samples::group_distribution());
        check(samples::host_trust());
    }

    /// The exchange a fetch result carries since schema 2 (the samples above have none, as
    /// schema 1's records read back): its layout is frozen too.
    #[test]
    fn a_fetch_result_s_exchange_layout_is_frozen() {
        let fixture = schemas_dir().join("fixtures/v2/fetch-result-exchange.bin");
        crate::envelope::check_fixture(&samples::fetch_result_with_exchange(), &fixture).unwrap();
    }

    /// What a reader of the released schema `released` could no longer rely on in
    /// `current`: a field removed, a field's type or format changed, a field newly
    /// required (old records lack it), or any other rule changed. Descriptions may change.
    fn breaking_changes(released: &Value, current: &Value) -> Vec<String> {
        fn compare(path: &str, released: &Value, current: &Value, found: &mut Vec<String>) {
            let (Value::Object(released), Value::Object(current)) = (released, current) else {
                // Items in place (an enum's `oneOf` variants): their descriptions may change.
                if let (Value::Array(was), Value::Array(now)) = (released, current) {
                    if was.len() == now.len() {
                        for (index, (was, now)) in was.iter().zip(now).enumerate() {
                            compare(&format!("{path}/{index}"), was, now, found);
                        }
                        return;
                    }
                }
                if released != current {
                    found.push(format!("{path}: {released} became {current}"));
                }
                return;
            };
            // Under `properties` and `$defs` the keys are names; elsewhere, schema keywords.
            let names = path.ends_with("/properties") || path.ends_with("/$defs");
            let annotation = |key: &str| !names && matches!(key, "description" | "title");
            for (key, was) in released {
                let at = format!("{path}/{key}");
                match current.get(key) {
                    _ if annotation(key) => {}
                    None => found.push(format!("{at}: removed")),
                    Some(now) if key == "required" && !names => {
                        let added: Vec<&Value> = now
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter(|field| !was.as_array().is_some_and(|was| was.contains(field)))
                            .collect();
                        if !added.is_empty() {
                            found.push(format!("{at}: newly required {added:?}"));
                        }
                    }
                    Some(now) => compare(&at, was, now, found),
                }
            }
            // A new optional field or definition is compatible; a new rule is not.
            for (key, rule) in current {
                let additive = names || annotation(key) || matches!(key.as_str(), "properties" | "$defs");
                if !additive && !released.contains_key(key) {
                    found.push(format!("{path}/{key}: new rule {rule}"));
                }
            }
        }
        let mut found = Vec::new();
        compare("", released, current, &mut found);
        found
    }

    /// Each message's schema keeps every field, type and rule of the schema released as its
    /// current version (frozen under `json/v<version>/`): a change that breaks a reader
    /// needs a version bump and a new frozen copy.
    #[test]
    fn no_field_is_removed_or_retyped_without_a_version_bump() {
        for described in message_types() {
            let version = described.version;
            let frozen = format!("json/v{version}/{}.schema.json", kebab_name(described.name));
            let text = std::fs::read_to_string(schemas_dir().join(&frozen)).unwrap_or_else(|e| {
                panic!("{frozen}: {e}; when releasing version {version}, copy json/<name>.schema.json there")
            });
            let released: Value = serde_json::from_str(&text).unwrap();
            let breaking = breaking_changes(&released, &described.schema);
            assert!(
                breaking.is_empty(),
                "{}: {breaking:#?}\nbump its Message::VERSION or undo the change",
                described.name
            );
        }
    }

    /// What analysts read is strict: at any depth an object lists every field as required
    /// and allows no other, and only JSON Schema's own formats appear.
    #[test]
    fn public_schemas_are_strict() {
        fn check(path: &str, schema: &Value) {
            match schema {
                Value::Object(object) => {
                    if let Some(Value::String(format)) = object.get("format") {
                        assert!(STANDARD_FORMATS.contains(&format.as_str()), "{path}: format {format}");
                    }
                    if let Some(Value::Object(properties)) = object.get("properties") {
                        assert_eq!(object.get("additionalProperties"), Some(&json!(false)), "{path}");
                        let required = object["required"].as_array().unwrap();
                        assert_eq!(required.len(), properties.len(), "{path}");
                    }
                    object.iter().for_each(|(key, value)| check(&format!("{path}/{key}"), value));
                }
                Value::Array(items) => items.iter().for_each(|item| check(path, item)),
                _ => {}
            }
        }
        let public: Vec<Described> =
            message_types().into_iter().filter(|t| t.format == Format::Json).collect();
        assert_eq!(public.len(), 6);
        for described in public {
            // Plain JSON since schema 2; the types added since, from their first.
            let born_json = [PageAnnouncement::NAME, HostTrust::NAME].contains(&described.name);
            assert!(born_json || described.version >= 2, "{}", described.name);
            check(described.name, &described.schema);
        }
    }

    #[test]
    fn breaking_changes_are_told_from_compatible_ones() {
        let released = json!({
            "type": "object",
            "required": ["url"],
            "properties": {
                "url": { "type": "string", "description": "the page" },
                "size": { "type": "integer", "format": "uint64" },
                "degrees": { "$ref": "#/$defs/Degrees" },
            },
            "$defs": {
                "Degrees": { "type": "object", "properties": { "ied": { "type": "number" } } },
                "Outcome": { "oneOf": [
                    { "const": "done", "type": "string", "description": "it was done" },
                    { "const": "late", "type": "string", "description": "no request was made" },
                ] },
            },
        });
        let with = |change: &dyn Fn(&mut Value)| {
            let mut current = released.clone();
            change(&mut current);
            breaking_changes(&released, &current)
        };
        assert!(with(&|_| {}).is_empty());
        let compatible = with(&|s| {
            s["properties"]["url"]["description"] = json!("the page's URL");
            s["properties"]["etag"] = json!({ "type": ["string", "null"] });
            s["$defs"]["Degrees"]["properties"]["cos"] = json!({ "type": "number" });
            s["$defs"]["Ops"] = json!({ "type": "object" });
            s["$defs"]["Outcome"]["oneOf"][1]["description"] = json!("the delay was ours");
        });
        assert!(compatible.is_empty(), "{compatible:?}");
        assert_eq!(
            with(&|s| s["$defs"]["Outcome"]["oneOf"][1]["const"] = json!("deferred")),
            [r#"/$defs/Outcome/oneOf/1/const: "late" became "deferred""#]
        );
        let added = with(&|s| {
            s["$defs"]["Outcome"]["oneOf"]
                .as_array_mut()
                .unwrap()
                .push(json!({ "const": "new", "type": "string" }))
        });
        assert!(added.len() == 1 && added[0].starts_with("/$defs/Outcome/oneOf: ["), "{added:?}");
        assert_eq!(
            with(&|s| drop(s["properties"].as_object_mut().unwrap().remove("size"))),
            ["/properties/size: removed"]
        );
        assert_eq!(
            with(&|s| s["properties"]["size"]["type"] = json!("string")),
            [r#"/properties/size/type: "integer" became "string""#]
        );
        assert_eq!(
            with(&|s| s["$defs"]["Degrees"]["properties"]["ied"]["type"] = json!("string")),
            [r#"/$defs/Degrees/properties/ied/type: "number" became "string""#]
        );
        assert_eq!(
            with(&|s| s["required"] = json!(["url", "size"])),
            [r#"/required: newly required [String("size")]"#]
        );
        assert_eq!(
            with(&|s| s["additionalProperties"] = json!(false)),
            ["/additionalProperties: new rule false"]
        );
        assert_eq!(
            with(&|s| s["properties"]["size"]["minimum"] = json!(1)),
            ["/properties/size/minimum: new rule 1"]
        );
    }
}
