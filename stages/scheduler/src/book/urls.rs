//! A partition's URL text: each scheme and authority once, each URL as what follows it.
//! The URLs of a partition share few authorities, which are about half of a URL's bytes
//! (`http://www3.site12.example` of `http://www3.site12.example/section/7/page.html`); a
//! number per URL names its authority instead, in two bytes while the partition has at
//! most 65,536 authorities. Where a remainder starts is kept for every [`STRIDE`]th
//! slot, with each remainder's length in two bytes: 2.25 bytes a URL instead of a 4-byte
//! offset.

use std::collections::HashMap;

use hashbrown::HashTable;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

use super::BookFull;

/// `url` up to the end of its authority (its first `/` after `://`, or all of it): the
/// part its host is read from, so two URLs sharing it share their host.
pub(super) fn authority_prefix(url: &str) -> &str {
    let Some((_, rest)) = url.split_once("://") else { return url };
    match rest.find('/') {
        Some(path) => url.get(..url.len().saturating_sub(rest.len()).saturating_add(path)).unwrap_or(url),
        None => url,
    }
}

/// The hash a URL is indexed by: its remainder's, seeded with its authority's, so that
/// a URL held in two parts hashes without being put together.
fn split_hash(authority_hash: u64, remainder: &str) -> u64 {
    xxh3_64_with_seed(remainder.as_bytes(), authority_hash)
}

/// The hash [`Urls::hash`] gives the slot holding `url`.
pub(super) fn url_hash(url: &str) -> u64 {
    let authority = authority_prefix(url);
    split_hash(xxh3_64(authority.as_bytes()), url.get(authority.len()..).unwrap_or_default())
}

/// Slots between two kept offsets: a start is found by adding at most this many lengths.
const STRIDE: usize = 16;

/// A length past what two bytes hold: the length is in `long_lengths`.
const LONG: u16 = u16::MAX;

/// Each slot's authority number: two bytes each until a number needs more, then four.
#[derive(Debug)]
enum AuthorityNumbers {
    Narrow(Vec<u16>),
    Wide(Vec<u32>),
}

impl Default for AuthorityNumbers {
    fn default() -> Self {
        Self::Narrow(Vec::new())
    }
}

impl AuthorityNumbers {
    fn get(&self, slot: usize) -> usize {
        match self {
            Self::Narrow(numbers) => usize::from(numbers[slot]),
            Self::Wide(numbers) => numbers[slot] as usize,
        }
    }

    fn push(&mut self, number: u32) {
        if let Self::Narrow(numbers) = self {
            match u16::try_from(number) {
                Ok(narrow) => return numbers.push(narrow),
                Err(_) => {
                    let mut wide = Vec::with_capacity(numbers.capacity());
                    wide.extend(numbers.iter().copied().map(u32::from));
                    *self = Self::Wide(wide);
                }
            }
        }
        if let Self::Wide(numbers) = self {
            numbers.push(number);
        }
    }

    fn reserve(&mut self, additional: usize) {
        match self {
            Self::Narrow(numbers) => numbers.reserve(additional),
            Self::Wide(numbers) => numbers.reserve(additional),
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Self::Narrow(numbers) => std::mem::size_of_val(numbers.as_slice()),
            Self::Wide(numbers) => std::mem::size_of_val(numbers.as_slice()),
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Urls {
    /// Each URL past its authority, slot after slot.
    remainders: Vec<u8>,
    /// Where the remainder of slot i·[`STRIDE`] starts in `remainders`.
    starts: Vec<u32>,
    /// Each slot's remainder's length, or [`LONG`].
    lengths: Vec<u16>,
    /// The lengths of [`LONG`] or more, by slot (none are under the schemas' 8 KiB bound).
    long_lengths: HashMap<u32, u32>,
    /// Slot i's authority, a number into `authorities`.
    authority_of: AuthorityNumbers,
    authorities: Vec<Box<str>>,
    /// Each authority's xxh3, the seed its URLs' remainders are hashed with.
    authority_hashes: Vec<u64>,
    /// Authority numbers by their hash.
    authority_index: HashTable<u32>,
    authority_bytes: usize,
}

impl Urls {
    fn length(&self, slot: usize) -> usize {
        match self.lengths[slot] {
            LONG => self.long_lengths.get(&(slot as u32)).map_or(0, |&length| length as usize),
            length => usize::from(length),
        }
    }

    /// `slot`'s URL as its authority and what follows it.
    pub(super) fn parts(&self, slot: u32) -> (&str, &str) {
        let slot = slot as usize;
        let first = slot.saturating_sub(slot % STRIDE);
        // Within 4 GiB: `push` checks every end.
        let start = (first..slot)
            .fold(self.starts[slot / STRIDE] as usize, |start, i| start.saturating_add(self.length(i)));
        let end = start.saturating_add(self.length(slot));
        // Only whole `&str`s split at a char boundary are appended, so every slot's
        // range is valid UTF-8.
        let remainder = std::str::from_utf8(&self.remainders[start..end]).unwrap_or_default();
        (&self.authorities[self.authority_of.get(slot)], remainder)
    }

    pub(super) fn url(&self, slot: u32) -> String {
        let (authority, remainder) = self.parts(slot);
        let mut url = String::with_capacity(authority.len().saturating_add(remainder.len()));
        url.push_str(authority);
        url.push_str(remainder);
        url
    }

    /// Whether `slot` holds `url`.
    pub(super) fn holds(&self, slot: u32, url: &str) -> bool {
        let (authority, remainder) = self.parts(slot);
        url.len() == authority.len().saturating_add(remainder.len())
            && url.starts_with(authority)
            && url.ends_with(remainder)
    }

    /// The hash of `slot`'s URL, as [`url_hash`] gives it.
    pub(super) fn hash(&self, slot: u32) -> u64 {
        let (_, remainder) = self.parts(slot);
        split_hash(self.authority_hashes[self.authority_of.get(slot as usize)], remainder)
    }

    /// Appends `url` as the next slot; its hash.
    pub(super) fn push(&mut self, url: &str) -> Result<u64, BookFull> {
        let authority = authority_prefix(url);
        let remainder = url.get(authority.len()..).unwrap_or_default();
        let start = u32::try_from(self.remainders.len()).map_err(|_| BookFull)?;
        let length = u32::try_from(remainder.len()).map_err(|_| BookFull)?;
        start.checked_add(length).ok_or(BookFull)?;
        let (number, authority_hash) = self.intern(authority)?;
        let slot = self.lengths.len();
        if slot.is_multiple_of(STRIDE) {
            self.starts.push(start);
        }
        match u16::try_from(length) {
            Ok(short) if short != LONG => self.lengths.push(short),
            _ => {
                self.lengths.push(LONG);
                self.long_lengths.insert(slot as u32, length);
            }
        }
        self.remainders.extend_from_slice(remainder.as_bytes());
        self.authority_of.push(number);
        Ok(split_hash(authority_hash, remainder))
    }

    fn intern(&mut self, authority: &str) -> Result<(u32, u64), BookFull> {
        let hash = xxh3_64(authority.as_bytes());
        let texts = &self.authorities;
        if let Some(&number) =
            self.authority_index.find(hash, |&number| &*texts[number as usize] == authority)
        {
            return Ok((number, hash));
        }
        let number = u32::try_from(self.authorities.len()).map_err(|_| BookFull)?;
        self.authorities.push(authority.into());
        self.authority_hashes.push(hash);
        self.authority_bytes = self.authority_bytes.saturating_add(authority.len());
        let hashes = &self.authority_hashes;
        self.authority_index.insert_unique(hash, number, |&number| hashes[number as usize]);
        Ok((number, hash))
    }

    /// Room for `urls` more URLs of about `bytes` bytes in all.
    pub(super) fn reserve(&mut self, urls: usize, bytes: usize) {
        self.remainders.reserve(bytes);
        self.starts.reserve(urls.div_ceil(STRIDE));
        self.lengths.reserve(urls);
        self.authority_of.reserve(urls);
    }

    /// Bytes of the remainders and authorities' text.
    pub(super) fn text_bytes(&self) -> usize {
        self.remainders.len().saturating_add(self.authority_bytes)
    }

    /// Bytes of the per-slot lengths, offsets and authority numbers, and of each
    /// authority's box, hash and index entry (a number and a control byte).
    pub(super) fn table_bytes(&self) -> usize {
        const AUTHORITY: usize = std::mem::size_of::<Box<str>>() + std::mem::size_of::<u64>();
        // A slot, a length and a control byte.
        const LONG_ENTRY: usize = 9;
        std::mem::size_of_val(self.starts.as_slice())
            .saturating_add(std::mem::size_of_val(self.lengths.as_slice()))
            .saturating_add(self.long_lengths.capacity().saturating_mul(LONG_ENTRY))
            .saturating_add(self.authority_of.bytes())
            .saturating_add(self.authorities.len().saturating_mul(AUTHORITY))
            .saturating_add(self.authority_index.capacity().saturating_mul(5))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_reads_back_whole_and_hashes_alike_from_its_parts_and_its_text() {
        let urls = [
            "http://a.example/x",
            "http://a.example/y?q=1",
            "https://a.example/x",
            "http://a.example:8080/x",
            "http://[::1]:9/p",
            "http://a.example",
            "http://a.example?only=query",
            "no scheme at all",
            "",
            "http://é.example/ü/ß",
            "http://a.example/",
        ];
        let mut held = Urls::default();
        let hashes: Vec<u64> = urls.iter().map(|url| held.push(url).expect("room")).collect();
        for (slot, url) in urls.iter().enumerate() {
            let slot = slot as u32;
            assert_eq!(held.url(slot), *url);
            assert_eq!(held.hash(slot), url_hash(url), "{url}");
            assert_eq!(hashes[slot as usize], url_hash(url), "{url}");
            assert!(held.holds(slot, url), "{url}");
            for other in urls.iter().filter(|other| *other != url) {
                assert!(!held.holds(slot, other), "{url} holds {other}");
            }
        }
        let distinct: std::collections::HashSet<&str> =
            urls.iter().map(|url| authority_prefix(url)).collect();
        assert_eq!(held.authorities.len(), distinct.len());
        let whole: usize = urls.iter().map(|url| url.len()).sum();
        assert!(held.text_bytes() < whole, "{} of {whole}", held.text_bytes());
    }

    #[test]
    fn remainders_of_every_length_read_back_across_the_kept_offsets() {
        let mut held = Urls::default();
        // Lengths around the two-byte limit among short ones, over several strides.
        let lengths = [0, 1, 70_000, 65_534, 65_535, 65_536, 3, 0, 200_000, 12];
        let urls: Vec<String> = (0..5 * STRIDE + 3)
            .map(|n| format!("http://h{}.example/{}", n % 3, "x".repeat(lengths[n % lengths.len()])))
            .collect();
        for url in &urls {
            held.push(url).expect("room");
        }
        for (slot, url) in urls.iter().enumerate() {
            assert_eq!(held.url(slot as u32), *url, "slot {slot}");
            assert_eq!(held.hash(slot as u32), url_hash(url), "slot {slot}");
        }
        let long = urls.iter().filter(|url| url.len() - "http://h0.example".len() >= 65_535).count();
        assert_eq!(held.long_lengths.len(), long);
    }

    #[test]
    fn authority_numbers_widen_past_two_bytes_and_keep_the_earlier_ones() {
        let mut held = Urls::default();
        let urls: Vec<String> = (0..70_000).map(|n| format!("http://h{n}.example/p")).collect();
        for (n, url) in urls.iter().enumerate() {
            held.push(url).expect("room");
            let narrow = matches!(held.authority_of, AuthorityNumbers::Narrow(_));
            assert_eq!(narrow, n <= usize::from(u16::MAX), "after {n}");
        }
        for slot in [0, 1, 65_535, 65_536, 69_999] {
            assert_eq!(held.url(slot), urls[slot as usize]);
            assert_eq!(held.hash(slot), url_hash(&urls[slot as usize]));
        }
    }

    #[test]
    fn urls_of_one_authority_keep_its_text_once() {
        let mut held = Urls::default();
        for n in 0..1000 {
            held.push(&format!("http://www3.site12.example/section/{n}.html")).expect("room");
        }
        assert_eq!(held.authorities.len(), 1);
        let remainders: usize = (0..1000).map(|n| format!("/section/{n}.html").len()).sum();
        assert_eq!(held.text_bytes(), remainders + "http://www3.site12.example".len());
    }
}
