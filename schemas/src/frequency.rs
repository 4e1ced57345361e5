//! Crawl-frequency groups (`docs/algorithms/refresh-groups.md` §2): a closed set of 16
//! names that estimates carry, so it lives with the messages.

use std::{borrow::Cow, fmt, str::FromStr};

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// A crawl-frequency group (`refresh-groups.md` §2). Serialised as its display name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrequencyGroup {
    /// `G1` … `G14`: that many crawls a week.
    Weekly(u8),
    /// `2G1`: once every two weeks.
    Biweekly,
    /// `4G1`: once every four weeks.
    Fourweekly,
}

impl FrequencyGroup {
    /// The 16-group of a weekly change rate: the rate rounded half away from zero, capped
    /// at 14 crawls a week; rates under one every two weeks (and NaN) fall to `4G1`.
    pub fn sixteen(weekly_rate: f64) -> FrequencyGroup {
        let rounded = weekly_rate.round();
        if rounded >= 14.0 {
            FrequencyGroup::Weekly(14)
        } else if weekly_rate >= 0.5 {
            FrequencyGroup::Weekly(rounded as u8)
        } else if weekly_rate >= 0.25 {
            FrequencyGroup::Biweekly
        } else {
            FrequencyGroup::Fourweekly
        }
    }

    /// The deployed 6-group of a 16-group; a 6-group maps to itself. A `Weekly` count
    /// outside 1..=14, which [`sixteen`](Self::sixteen) never makes, is clamped first.
    pub fn six(self) -> FrequencyGroup {
        match self {
            FrequencyGroup::Weekly(crawls) => FrequencyGroup::Weekly(match crawls.clamp(1, 14) {
                11.. => 14,
                5..=10 => 7,
                2..=4 => 3,
                _ => 1,
            }),
            other => other,
        }
    }

    pub fn crawls_per_week(self) -> f64 {
        match self {
            FrequencyGroup::Weekly(crawls) => f64::from(crawls.clamp(1, 14)),
            FrequencyGroup::Biweekly => 0.5,
            FrequencyGroup::Fourweekly => 0.25,
        }
    }
}

impl fmt::Display for FrequencyGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrequencyGroup::Weekly(crawls) => write!(f, "G{crawls}"),
            FrequencyGroup::Biweekly => f.write_str("2G1"),
            FrequencyGroup::Fourweekly => f.write_str("4G1"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown frequency group {0:?}: expected G1 to G14, 2G1 or 4G1")]
pub struct UnknownFrequencyGroup(pub String);

impl FromStr for FrequencyGroup {
    type Err = UnknownFrequencyGroup;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        match name {
            "2G1" => Ok(FrequencyGroup::Biweekly),
            "4G1" => Ok(FrequencyGroup::Fourweekly),
            _ => name
                .strip_prefix('G')
                .and_then(|crawls| crawls.parse().ok())
                .filter(|crawls| (1..=14).contains(crawls))
                .map(FrequencyGroup::Weekly)
                .ok_or_else(|| UnknownFrequencyGroup(name.to_owned())),
        }
    }
}

impl Serialize for FrequencyGroup {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for FrequencyGroup {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

impl FrequencyGroup {
    /// Every group, most frequent first: the values of the JSON Schema's enum.
    pub fn all() -> impl Iterator<Item = Self> {
        (1..=14).rev().map(Self::Weekly).chain([Self::Biweekly, Self::Fourweekly])
    }
}

impl JsonSchema for FrequencyGroup {
    fn schema_name() -> Cow<'static, str> {
        "FrequencyGroup".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let names: Vec<String> = Self::all().map(|group| group.to_string()).collect();
        json_schema!({
            "description": "A crawl-frequency group: Gn is n crawls a week (1 to 14), 2G1 one every two weeks, 4G1 one every four weeks.",
            "type": "string",
            "enum": names,
        })
    }
}
