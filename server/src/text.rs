//! Free text cut to a bound at a character boundary, saying how much was cut: what a node or a
//! cluster said, before it is stored, logged or shown.

/// Cuts `s` to at most `max` bytes at a character boundary, saying how much was cut.
pub fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{} [... {} more bytes cut by hearth-server]",
        &s[..end],
        s.len() - end
    )
}

/// Keeps the last `max` bytes of `s` at a character boundary, saying how much was cut (for the
/// end of an output, where the last lines matter).
pub fn cut_front(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    format!("[{} bytes cut by hearth-server ...] {}", start, &s[start..])
}
