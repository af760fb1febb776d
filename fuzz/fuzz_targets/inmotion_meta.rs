#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| inmotion::fuzzing::inmotion_meta(data));
