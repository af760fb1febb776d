//! The seed's path to the compute seam, kept because callers and scripts use it: everything
//! here is [`crate::backend`].

pub use crate::backend::*;
