#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| kin_infer_server::fuzzing::request(data));
