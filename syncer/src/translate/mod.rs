//! Pure translation between virtual objects and their host copies.
