#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| inmotion::fuzzing::golden_inmotion(data));
