//! Model families, one file each, built from the shared blocks in [`crate::nn`].

pub mod encoders;

pub use encoders::bert::BertModel;
