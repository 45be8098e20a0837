//! weir-server (being written)
