#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| kin_infer::fuzzing::corpus_run(data));
