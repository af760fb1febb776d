//! Numerics pins: a fingerprint of output bits, checked against the fingerprints a numerics
//! version was released with. kin-infer's model families and inMotion's artifacts are pinned
//! the same way (their `numerics` tests), so a moved bit fails alike in both, and an intended
//! change bumps the version with new pins. Test support, hidden from the docs like `fuzzing`.

/// One pin: (numerics version, case name, fingerprint of its output bits).
pub type Pin = (&'static str, &'static str, u64);

/// FNV-1a over the bit patterns of `values`, in order.
pub fn fingerprint<'a>(values: impl IntoIterator<Item = &'a [f32]>) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for v in values {
        for x in v {
            for b in x.to_bits().to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
        }
    }
    h
}

/// Panics naming every case whose fingerprint (`fingerprint_of(name)`) is not its pin under
/// `version`, or that has no pin. With `KIN_PRINT_PINS=1` it prints the current fingerprints
/// as pin lines instead (how pins are taken, on the code before the change under test).
pub fn assert_pinned<S: AsRef<str>>(
    version: &str,
    pins: &[Pin],
    names: &[S],
    fingerprint_of: impl Fn(&str) -> u64,
) {
    if std::env::var("KIN_PRINT_PINS").is_ok_and(|v| v == "1") {
        for name in names.iter().map(AsRef::as_ref) {
            println!(
                "    (\"{version}\", \"{name}\", {:#x}),",
                fingerprint_of(name)
            );
        }
        return;
    }
    let mut failures = Vec::new();
    for name in names.iter().map(AsRef::as_ref) {
        let Some(&(_, _, want)) = pins.iter().find(|p| p.0 == version && p.1 == name) else {
            failures.push(format!("{name}: no pin for {version}: add one"));
            continue;
        };
        let got = fingerprint_of(name);
        if got != want {
            failures.push(format!("{name}: got {got:#x}, pinned {want:#x}"));
        }
    }
    assert!(
        failures.is_empty(),
        "output bits changed under numerics version {version} (if intended, bump the numerics \
         version and pin the new values; KIN_PRINT_PINS=1 prints them):\n{}",
        failures.join("\n")
    );
}
