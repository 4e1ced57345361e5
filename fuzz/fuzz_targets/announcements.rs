#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| recrawl_fuzz::announcements(data));
