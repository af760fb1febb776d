//! Writes a random-weight artifact at the published sizes (issue 5's speed table), for `bench`
//! on machines without the trained fixtures:
//! `cargo run --release -p inmotion --example random_artifact -- FAMILY OUT_DIR [fp32|int8|q4]`.

use inmotion::meta::{Family, Granularity, IntLayout, Meta};
use inmotion::writer;
use serde_json::json;
use std::path::Path;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        eprintln!("usage: random_artifact FAMILY OUT_DIR [fp32|int8|q4]");
        std::process::exit(2);
    }
    let family = Family::parse(&args[0]).unwrap_or_else(|| {
        eprintln!("unknown family {}", args[0]);
        std::process::exit(2)
    });
    let scheme = args.get(2).map_or("fp32", String::as_str);
    let layout = match scheme {
        "fp32" => None,
        "int8" => Some(IntLayout {
            bits: 8,
            granularity: Granularity::PerChannel,
            group_size: 0,
        }),
        "q4" => Some(IntLayout {
            bits: 4,
            granularity: Granularity::PerGroup,
            group_size: 32,
        }),
        other => {
            eprintln!("unknown scheme {other} (fp32, int8, q4)");
            std::process::exit(2)
        }
    };
    let out = Path::new(&args[1]);
    if let Err(e) = write(family, scheme, layout, out) {
        eprintln!("error: {e}");
        std::process::exit(2);
    }
}

fn write(
    family: Family,
    scheme: &str,
    layout: Option<IntLayout>,
    out: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let base = writer::meta_json(
        family,
        writer::published_hparams(family),
        json!({"scheme": "fp32"}),
    );
    let meta = Meta::from_value(&base, Path::new("meta.json"))?;
    let mut tensors = writer::random_tensors(&meta, 7);
    let mut q = json!({"scheme": "fp32"});
    if let Some(l) = layout {
        let names: Vec<String> = writer::tensor_specs(&meta)
            .into_iter()
            .filter(|(_, _, quantizable)| *quantizable)
            .map(|(n, _, _)| n)
            .collect();
        writer::quantize(&mut tensors, &names, &l);
        q = json!({"scheme": scheme, "bits": l.bits, "granularity": l.granularity.name(),
                   "group_size": l.group_size, "axis": 0, "symmetric": false,
                   "producer": "inmotion::writer", "tensors": names});
    }
    let mut m = base.clone();
    m["quantization"] = q;
    writer::write_artifact(out, &m, &tensors)?;
    Ok(())
}
