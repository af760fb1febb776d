//! The wgpu backend's WGSL compute shaders, one per operation, generated from the kernel
//! bodies of `bodies.rs` (which the CUDA kernels are generated from too).
//!
//! Conventions (every shader): binding 0 is the op's parameters, a struct `p` generated from
//! its description in `params.rs` (fields read by name: `p.rows`), bindings 1.. the tensors
//! in the order the Rust side passes them; every binding is read by the shader (the
//! pipelines' layouts are derived from what each entry point uses).
//! Views are whole buffers plus an element offset in the parameters, so no binding offset has
//! to meet the device's alignment. One invocation computes one output element (or one row) with
//! a sequential loop: each element's reduction has one fixed order whatever the batch, so
//! results are identical run to run and across batch compositions (no atomics anywhere).
//! Invocations are numbered by [`PRELUDE`]'s `flat` over a 2-D grid of 64-wide workgroups
//! (one dimension alone stops at 65,535 workgroups).

/// Shared by every shader: the flat invocation index, and the dialect's unfused products and
/// sums (plain operators here: WGSL has no rounding intrinsics).
const PRELUDE: &str = r#"
fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 { return gid.x + gid.y * nwg.x * 64u; }
fn mul_rn(a: f32, b: f32) -> f32 { return a * b; }
fn add_rn(a: f32, b: f32) -> f32 { return a + b; }
fn sub_rn(a: f32, b: f32) -> f32 { return a - b; }
"#;

use super::dialect::{self, to_wgsl};

/// Shader `op`'s whole source: the CPU's constants (as exact decimal literals), the format
/// codes, its parameter struct (`params.rs`), [`PRELUDE`] and the dialect's helpers, its
/// bindings, the stored-weight readers where it binds a `u32` buffer `w`, its `weight`, and
/// its body (`bodies.rs`) in an entry point. `None` if there is no kernel `op`.
pub(super) fn source(op: &str) -> Option<String> {
    let k = super::bodies::body(op)?;
    let consts: String = super::math_constants()
        .iter()
        .map(|(name, v)| format!("const {name}: f32 = {v:e};\n"))
        .collect();
    let codes: String = super::params::format_codes()
        .iter()
        .map(|(name, c)| format!("const {name}: u32 = {c}u;\n"))
        .collect();
    let params = super::params::wgsl_struct(op);
    let helpers = to_wgsl(dialect::HELPERS);
    let mut out = format!("{consts}{codes}{params}{PRELUDE}{helpers}");
    for (j, (name, ty, write)) in k.bufs.iter().enumerate() {
        let access = if *write { "read_write" } else { "read" };
        out += &format!(
            "@group(0) @binding({}) var<storage, {access}> {name}: array<{ty}>;\n",
            j + 1
        );
    }
    if k.bufs.contains(&("w", "u32", false)) {
        out += &to_wgsl(dialect::WQ);
    }
    if let Some(w) = k.weight {
        let w = to_wgsl(w);
        out += &format!("fn weight(c: u32, t: u32) -> f32 {{ return {w}; }}\n");
    }
    out += "@compute @workgroup_size(64)\n";
    out += "fn main(@builtin(global_invocation_id) gid: vec3<u32>, \
            @builtin(num_workgroups) nwg: vec3<u32>) {\n    let i = flat(gid, nwg);";
    out += &to_wgsl(k.body);
    out += "}\n";
    Some(out)
}
