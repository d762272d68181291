//! Emptiness for serialisation, shared by the model (`v3.rs`) and the 2.x wire types (`v2.rs`):
//! the [`EmptyValue`] trait and the `empty_check!` macro that gives a section an `is_empty`
//! (for `skip_serializing_if`).

/// `impl $ty { pub fn is_empty }`: true when every listed field is empty ([`EmptyValue`]).
/// The module is declared with `#[macro_use]` before `v2` and `v3`, which use it (macros are
/// scoped by text order).
macro_rules! empty_check {
    ($ty:ty { $($field:ident),* }) => {
        impl $ty {
            /// True when no field is set.
            pub fn is_empty(&self) -> bool {
                true $(&& self.$field.is_empty_value())*
            }
        }
    };
}

/// Emptiness for serialisation (`skip_serializing_if`).
pub trait EmptyValue {
    /// True when the value carries nothing.
    fn is_empty_value(&self) -> bool;
}
impl<T> EmptyValue for Vec<T> {
    fn is_empty_value(&self) -> bool {
        self.is_empty()
    }
}
impl<T> EmptyValue for Option<T> {
    fn is_empty_value(&self) -> bool {
        self.is_none()
    }
}
