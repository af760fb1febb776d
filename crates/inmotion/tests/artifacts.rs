//! Artifacts end to end: parity on every committed fixture (and conformance artifact), the
//! same bits on every SIMD tier, every quantization width and granularity against its
//! dequantized float twin, published-size random artifacts, and malformed artifacts.

use inmotion::golden::{self, Golden};
use inmotion::meta::{Family, Granularity, IntLayout, Meta};
use inmotion::writer::{self, Data, Tensor};
use inmotion::{Error, Model};
use kin_infer_core::kernels::Tier;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn fixtures_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/inmotion")
}

/// Every directory under tests/fixtures/inmotion (one level, plus conformance/) holding an
/// artifact with a golden.
fn fixture_artifacts() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let root = fixtures_root();
    for dir in [root.clone(), root.join("conformance")] {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.join("meta.json").is_file() && p.join("golden.json").is_file() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_fixture_artifact_reproduces_its_golden() {
    let arts = fixture_artifacts();
    assert!(
        !arts.is_empty(),
        "no fixture artifacts under {}",
        fixtures_root().display()
    );
    for a in &arts {
        let mut m = Model::load(a).unwrap_or_else(|e| panic!("{}: {e}", a.display()));
        let g = Golden::load(a, &m.meta).unwrap();
        let r = golden::check(&mut m, &g);
        assert!(r.passed(), "{}: {:?}", a.display(), r.mismatches.first());
        eprintln!(
            "{:<40} max |diff| {:.3e}",
            a.file_name().unwrap().to_string_lossy(),
            r.max_diff
        );
    }
}

/// Every exact (FMA) tier gives the generic tier's bits; a tier without FMA (kin-infer's
/// `sse`, by name so this compiles whether or not it exists) agrees within the golden's tol.
#[test]
fn every_tier_gives_the_generic_bits() {
    let tiers = Tier::available();
    let generic = Tier::Generic;
    for a in fixture_artifacts() {
        let mut reference = Model::load_with(&a, generic).unwrap();
        let g = Golden::load(&a, &reference.meta).unwrap();
        let want: Vec<Vec<u32>> = g
            .cases
            .iter()
            .map(|c| {
                reference
                    .forward(&c.input)
                    .iter()
                    .map(|x| x.to_bits())
                    .collect()
            })
            .collect();
        for &t in &tiers {
            let mut m = Model::load_with(&a, t).unwrap();
            for (c, w) in g.cases.iter().zip(&want) {
                let out = m.forward(&c.input);
                if t.name() == "sse" {
                    for (x, e) in out.iter().zip(&c.expected) {
                        assert!((*x as f64 - e).abs() <= g.tol, "{} on {t:?}", a.display());
                    }
                    continue;
                }
                let got: Vec<u32> = out.iter().map(|x| x.to_bits()).collect();
                assert_eq!(&got, w, "{} on {t:?}", a.display());
            }
        }
    }
}

/// Quantized artifacts keep their weight matrices as codes in memory (integer affine blocks
/// the GEMM dequantizes), and their outputs are, on every exact tier, the bits of the same
/// artifact dequantized to f32 at load (the reference path). The trained transformer int8 and
/// q4 models keep codes; sigreg's quantized convolutions are folded with their BatchNorms at
/// load (new values, so f32), and its latent projection's rows are not whole groups of 32.
#[test]
fn quantized_artifacts_keep_codes_with_the_dequantized_bits() {
    let mut kept_any = 0;
    for a in fixture_artifacts() {
        let generic = Model::load_with(&a, Tier::Generic).unwrap();
        if generic.meta.quantization.int.is_none() {
            assert_eq!(generic.codes_in_memory, (0, 0), "{}", a.display());
            continue;
        }
        let name = a.file_name().unwrap().to_string_lossy().to_string();
        let trained = !a.parent().unwrap().ends_with("conformance");
        if trained && !name.starts_with("sigreg") {
            assert!(
                generic.codes_in_memory.0 > 0,
                "{name}: no matrix kept as codes"
            );
        }
        kept_any += generic.codes_in_memory.0;
        let g = Golden::load(&a, &generic.meta).unwrap();
        for t in Tier::available_exact() {
            let be = |t| Box::new(kin_infer_core::backend::CpuCompute::with_tier(t).unwrap());
            let mut codes = Model::load_on_with(&a, be(t), true).unwrap();
            let mut floats = Model::load_on_with(&a, be(t), false).unwrap();
            assert_eq!(floats.codes_in_memory, (0, 0));
            for c in &g.cases {
                let x: Vec<u32> = codes
                    .forward(&c.input)
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                let y: Vec<u32> = floats
                    .forward(&c.input)
                    .iter()
                    .map(|v| v.to_bits())
                    .collect();
                assert_eq!(x, y, "{name} on {t:?}: codes vs dequantized at load");
            }
        }
    }
    assert!(kept_any > 0);
}

/// A small artifact of `family` (random weights), optionally quantized.
fn small_meta(
    family: Family,
    layout: Option<&IntLayout>,
    scheme: &str,
) -> (Value, BTreeMap<String, Tensor>) {
    let hp = match family {
        Family::Sigreg => json!({"num_filters": 10, "num_blocks": 2, "latent_dim": 6}),
        Family::TJepa => {
            json!({"d_model": 8, "n_heads": 2, "num_layers": 2, "dim_feedforward": 12, "head_hidden": 6, "n_reg": 2})
        }
        Family::TsJepa => {
            json!({"d_model": 8, "n_heads": 2, "num_layers": 2, "dim_feedforward": 12, "head_hidden": 6, "patch_size": 5})
        }
        _ => {
            json!({"d_model": 8, "n_heads": 2, "num_layers": 2, "dim_feedforward": 12, "head_hidden": 6})
        }
    };
    artifact(family, hp, 11, layout, scheme)
}

/// An artifact of `family` with hyperparameters `hp` and random weights from `seed`, its
/// quantizable tensors quantized to `layout` (recorded as `scheme`) when given.
fn artifact(
    family: Family,
    hp: Value,
    seed: u64,
    layout: Option<&IntLayout>,
    scheme: &str,
) -> (Value, BTreeMap<String, Tensor>) {
    let mut v = writer::meta_json(family, hp, json!({"scheme": "fp32"}));
    let meta = Meta::from_value(&v, Path::new("meta.json")).unwrap();
    let mut t = writer::random_tensors(&meta, seed);
    if let Some(l) = layout {
        let names: Vec<String> = writer::tensor_specs(&meta)
            .into_iter()
            .filter(|s| s.2)
            .map(|s| s.0)
            .collect();
        writer::quantize(&mut t, &names, l);
        v["quantization"] = json!({"scheme": scheme, "bits": l.bits, "granularity": l.granularity.name(),
                                   "group_size": l.group_size, "tensors": names});
    }
    (v, t)
}

fn window(meta: &Meta, seed: u64) -> Vec<f32> {
    let mut r = writer::Rng::new(seed);
    (0..meta.window_len()).map(|_| 2.0 * r.uniform()).collect()
}

#[test]
fn every_width_and_granularity_equals_its_dequantized_float_twin() {
    let tmp = tempfile::tempdir().unwrap();
    for family in Family::ALL {
        for bits in 2..=8u32 {
            for (granularity, group_size) in [
                (Granularity::PerTensor, 0),
                (Granularity::PerChannel, 0),
                (Granularity::PerGroup, 3),
                (Granularity::PerGroup, 5),
            ] {
                let l = IntLayout {
                    bits,
                    granularity,
                    group_size,
                };
                let (meta_q, tq) = small_meta(family, Some(&l), &format!("q{bits}"));
                // The float twin: every quantized tensor replaced by its dequantized values.
                let (meta_f, mut tf) = small_meta(family, None, "fp32");
                for name in meta_q["quantization"]["tensors"].as_array().unwrap() {
                    let name = name.as_str().unwrap();
                    let shape = tf[name].shape.clone();
                    let rows = shape[0];
                    let cols = shape.iter().product::<usize>() / rows;
                    let get = |s: &str| match &tq[&format!("{name}.{s}")].data {
                        Data::F32(v) => v.clone(),
                        Data::U8(v) => v.iter().map(|&b| b as f32).collect(),
                        _ => unreachable!(),
                    };
                    let q: Vec<u8> = get("__q").iter().map(|&b| b as u8).collect();
                    let w = inmotion::weights::dequantize(
                        &q,
                        &get("__scale"),
                        &get("__zero"),
                        rows,
                        cols,
                        &l,
                    );
                    tf.insert(name.to_string(), Tensor::f32(shape, w));
                }
                let (dq, df) = (tmp.path().join("q"), tmp.path().join("f"));
                writer::write_artifact(&dq, &meta_q, &tq).unwrap();
                writer::write_artifact(&df, &meta_f, &tf).unwrap();
                let mut mq = Model::load(&dq).unwrap_or_else(|e| panic!("{family:?} {l:?}: {e}"));
                let mut mf = Model::load(&df).unwrap();
                let x = window(&mq.meta, 3);
                let a: Vec<u32> = mq.forward(&x).iter().map(|v| v.to_bits()).collect();
                let b: Vec<u32> = mf.forward(&x).iter().map(|v| v.to_bits()).collect();
                assert_eq!(a, b, "{family:?} {l:?}");
            }
        }
    }
}

#[test]
fn published_size_random_artifacts_load_and_predict() {
    let tmp = tempfile::tempdir().unwrap();
    for family in Family::ALL {
        for (scheme, layout) in [
            ("fp32", None),
            (
                "int8",
                Some(IntLayout {
                    bits: 8,
                    granularity: Granularity::PerChannel,
                    group_size: 0,
                }),
            ),
            (
                "q4",
                Some(IntLayout {
                    bits: 4,
                    granularity: Granularity::PerGroup,
                    group_size: 32,
                }),
            ),
        ] {
            let hp = writer::published_hparams(family);
            let (v, t) = artifact(family, hp, 5, layout.as_ref(), scheme);
            let dir = tmp.path().join(format!("{}_{scheme}", family.name()));
            writer::write_artifact(&dir, &v, &t).unwrap();
            let start = std::time::Instant::now();
            let mut m = Model::load(&dir).unwrap_or_else(|e| panic!("{family:?} {scheme}: {e}"));
            let x = window(&m.meta, 9);
            let (logits, probs) = m.classify(&x);
            let ms = start.elapsed().as_secs_f64() * 1e3;
            assert_eq!(logits.len(), 4);
            assert!(
                logits.iter().all(|v| v.is_finite()),
                "{family:?} {scheme}: {logits:?}"
            );
            assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-5);
            if let Some(n) = m.n_tokens() {
                let want = match family {
                    Family::Lejepa => 10,
                    Family::TJepa => 42,
                    Family::TsJepa => 5,
                    _ => 4,
                };
                assert_eq!(n, want, "{family:?}");
            }
            eprintln!(
                "{:<8} {scheme:<5} load + first window {ms:.2} ms",
                family.name()
            );
        }
    }
}

// ---- malformed artifacts: each error names the file and the field or tensor ----

fn write_small(dir: &Path, family: Family) -> (Value, BTreeMap<String, Tensor>) {
    let (v, t) = small_meta(family, None, "fp32");
    writer::write_artifact(dir, &v, &t).unwrap();
    (v, t)
}

fn load_err(dir: &Path) -> String {
    match Model::load(dir) {
        Ok(_) => panic!("{} loaded but should not", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_artifacts_are_rejected_with_the_name_of_the_fault() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("a");
    let (v, t) = write_small(&d, Family::Lejepa);
    Model::load(&d).unwrap();

    // truncated safetensors
    let bytes = std::fs::read(d.join("model.safetensors")).unwrap();
    std::fs::write(d.join("model.safetensors"), &bytes[..bytes.len() - 10]).unwrap();
    let e = load_err(&d);
    assert!(
        e.contains("model.safetensors") && e.contains("invalid safetensors"),
        "{e}"
    );

    // missing tensor
    let mut t2 = t.clone();
    t2.remove("head.3.bias");
    writer::write_artifact(&d, &v, &t2).unwrap();
    let e = load_err(&d);
    assert!(e.contains("`head.3.bias`") && e.contains("missing"), "{e}");

    // extra tensor
    let mut t2 = t.clone();
    t2.insert("head.9.weight".into(), Tensor::f32(vec![2], vec![0.0; 2]));
    writer::write_artifact(&d, &v, &t2).unwrap();
    let e = load_err(&d);
    assert!(e.contains("`head.9.weight`") && e.contains("extra"), "{e}");

    // wrong shape (declared d_model disagrees with the weights)
    let mut v2 = v.clone();
    v2["hparams"]["head_hidden"] = json!(7);
    writer::write_artifact(&d, &v2, &t).unwrap();
    let e = load_err(&d);
    assert!(e.contains("`head.0.weight`") && e.contains("shape"), "{e}");

    // bad sha
    let mut v2 = v.clone();
    v2["weights_sha256"] = json!("0".repeat(64));
    writer::write_artifact(&d, &v2, &t).unwrap();
    let e = load_err(&d);
    assert!(e.contains("weights_sha256 mismatch"), "{e}");
    // the right sha loads
    let sha = inmotion::sha256::sha256_hex(&writer::safetensors_bytes(&t));
    v2["weights_sha256"] = json!(sha);
    writer::write_artifact(&d, &v2, &t).unwrap();
    Model::load(&d).unwrap();

    // unknown model / format, missing and ill-typed fields
    for (key, val, needle) in [
        ("model", json!("mamba"), "unknown model `mamba`"),
        ("format", json!("inmotion-artifact/9"), "unknown format"),
        ("seq_len", Value::Null, "field `seq_len`: missing"),
        ("num_classes", json!("four"), "field `num_classes`"),
        ("quantization", Value::Null, "field `quantization`: missing"),
    ] {
        let mut v2 = v.clone();
        if val.is_null() {
            v2.as_object_mut().unwrap().remove(key);
        } else {
            v2[key] = val;
        }
        writer::write_artifact(&d, &v2, &t).unwrap();
        let e = load_err(&d);
        assert!(e.contains("meta.json") && e.contains(needle), "{key}: {e}");
    }
    let mut v2 = v.clone();
    v2["hparams"].as_object_mut().unwrap().remove("n_heads");
    writer::write_artifact(&d, &v2, &t).unwrap();
    assert!(load_err(&d).contains("field `hparams.n_heads`: missing"));

    // a non-float tensor that is not a code tensor
    let mut t2 = t.clone();
    t2.insert(
        "head.0.weight".into(),
        Tensor {
            shape: vec![6, 8],
            data: Data::U8(vec![0; 48]),
        },
    );
    writer::write_artifact(&d, &v, &t2).unwrap();
    let e = load_err(&d);
    assert!(
        e.contains("`head.0.weight`") && e.contains("not allowed"),
        "{e}"
    );

    // unknown hparams / provenance keys are ignored; num_batches_tracked may be absent
    let mut v2 = v.clone();
    v2["hparams"]["future_knob"] = json!(3);
    v2["provenance"]["anything"] = json!([1, 2]);
    let t2: BTreeMap<String, Tensor> = t
        .clone()
        .into_iter()
        .filter(|(k, _)| !k.ends_with("num_batches_tracked"))
        .collect();
    writer::write_artifact(&d, &v2, &t2).unwrap();
    Model::load(&d).unwrap();
}

#[test]
fn quantized_tensor_faults_name_the_tensor() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("q");
    let l = IntLayout {
        bits: 5,
        granularity: Granularity::PerGroup,
        group_size: 3,
    };
    let (v, t) = small_meta(Family::Sigreg, Some(&l), "q5_pg3");
    writer::write_artifact(&d, &v, &t).unwrap();
    Model::load(&d).unwrap();
    // wrong bits in meta → the code tensor's shape disagrees
    let mut v2 = v.clone();
    v2["quantization"]["bits"] = json!(6);
    writer::write_artifact(&d, &v2, &t).unwrap();
    let e = load_err(&d);
    assert!(e.contains(".__q`"), "{e}");
    // bits out of range
    v2["quantization"]["bits"] = json!(9);
    writer::write_artifact(&d, &v2, &t).unwrap();
    assert!(load_err(&d).contains("quantization.bits"));
    // a listed tensor whose codes are missing
    let mut t2 = t.clone();
    t2.remove("classifier.weight.__scale");
    writer::write_artifact(&d, &v, &t2).unwrap();
    assert!(load_err(&d).contains("`classifier.weight.__scale`"));
    // Error type carries the path
    let e = Model::load(&tmp.path().join("nope")).err().unwrap();
    assert!(matches!(e, Error::Input(_)));
}
