//! The arguments of backend ops that are more than numbers and views: pooling modes and rotary
//! rows. They sit below `backend` (which takes them) and `nn` (which builds them), so the seam
//! imports nothing from the layers above it. `nn::pooling` and `nn::rope` re-export them.

pub mod f64_math;
pub mod pooling;
pub mod rotary;
