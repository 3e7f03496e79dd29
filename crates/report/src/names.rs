//! Short C++ names for text views: a demangled libstdc++ instantiation runs to hundreds of
//! characters (`std::map<std::__cxx11::basic_string<char, std::char_traits<char>,
//! std::allocator<char> >, long, ...>::operator[](...)`), which buries every table it is in.
//! Text reports show [`short_name`]; JSON, LCOV, Cobertura and the HTML pages' titles keep the
//! full demangled name, and `--function` matches it.

use std::borrow::Cow;

/// Names in text tables and headers are shortened past this many characters.
pub const SHORT_NAME_MAX: usize = 60;

/// The spellings libstdc++'s typedefs stand for, replaced by the typedefs (longest first).
const TYPEDEFS: &[(&str, &str)] = &[
    (
        "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >",
        "std::string",
    ),
    (
        "std::basic_string<char, std::char_traits<char>, std::allocator<char> >",
        "std::string",
    ),
    (
        "std::basic_string_view<char, std::char_traits<char> >",
        "std::string_view",
    ),
    (
        "std::basic_ostream<char, std::char_traits<char> >",
        "std::ostream",
    ),
    (
        "std::basic_istream<char, std::char_traits<char> >",
        "std::istream",
    ),
    ("std::basic_ios<char, std::char_traits<char> >", "std::ios"),
    ("std::__cxx11::", "std::"),
];

/// `demangled` for a text view: libstdc++'s typedefs in place of what they stand for, then,
/// while longer than `max` characters, template argument lists nested two deep, then one deep,
/// shown as `<…>`, and last the parameter list as `(…)`. Names that fit are returned as they
/// are (C names always).
pub fn short_name(demangled: &str, max: usize) -> Cow<'_, str> {
    if demangled.chars().count() <= max && !TYPEDEFS.iter().any(|t| demangled.contains(t.0)) {
        return Cow::Borrowed(demangled);
    }
    let mut s = demangled.to_string();
    for (long, short) in TYPEDEFS {
        if s.contains(long) {
            // The demangler spaces `> >`; after a typedef the space goes too.
            if long.ends_with('>') {
                s = s.replace(&format!("{long} >"), &format!("{short}>"));
            }
            s = s.replace(long, short);
        }
    }
    for depth in [2, 1] {
        if s.chars().count() <= max {
            break;
        }
        s = collapse_templates(&s, depth);
    }
    if s.chars().count() > max {
        s = collapse_last_params(&s);
    }
    Cow::Owned(s)
}

/// `s` with every template argument list that opens at angle depth `depth` or deeper (the
/// outermost lists are depth 1) replaced by `<…>`. The `<` and `>` of operator names
/// (`operator<<`, `operator->`, ...) are not brackets.
fn collapse_templates(s: &str, depth: usize) -> String {
    let mut out = String::with_capacity(s.len());
    let mut level = 0usize;
    let mut rest = s;
    let mut prev = ' ';
    while let Some(c) = rest.chars().next() {
        let word_start = !(prev.is_alphanumeric() || prev == '_');
        if let Some(after) = rest.strip_prefix("operator").filter(|_| word_start) {
            // The operator's own symbol characters are copied as they are.
            let sym = after
                .find(|c: char| !matches!(c, '<' | '>' | '=' | '-' | '!'))
                .unwrap_or(after.len());
            if level < depth {
                out.push_str(&rest[..8 + sym]);
            }
            rest = &after[sym..];
            prev = '=';
            continue;
        }
        prev = c;
        match c {
            '<' => {
                level += 1;
                if level == depth {
                    out.push_str("<…");
                } else if level < depth {
                    out.push('<');
                }
            }
            '>' if level > 0 => {
                if level <= depth {
                    out.push('>');
                }
                level -= 1;
            }
            _ if level < depth => out.push(c),
            _ => {}
        }
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// `s` with its last top-level parameter list (outside any template arguments) shown as `(…)`.
fn collapse_last_params(s: &str) -> String {
    let (mut level, mut angle) = (0usize, 0usize);
    let mut open = None;
    let mut span = None;
    for (i, c) in s.char_indices() {
        match c {
            '<' => angle += 1,
            '>' => angle = angle.saturating_sub(1),
            '(' => {
                if level == 0 && angle == 0 {
                    open = Some(i);
                }
                level += 1;
            }
            ')' => {
                level = level.saturating_sub(1);
                if level == 0 && angle == 0 {
                    if let Some(o) = open {
                        span = Some((o, i));
                    }
                }
            }
            _ => {}
        }
    }
    match span {
        Some((o, c)) if c > o + 1 => format!("{}(…){}", &s[..o], &s[c + 1..]),
        _ => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_and_short_names_are_unchanged() {
        for n in [
            "main",
            "table_add",
            "ns::f(int)",
            "std::vector<int>::push_back(int&&)",
        ] {
            assert!(matches!(short_name(n, 60), Cow::Borrowed(_)), "{n}");
        }
    }

    #[test]
    fn typedefs_then_nested_templates_then_parameters() {
        let op = "std::map<std::__cxx11::basic_string<char, std::char_traits<char>, \
                  std::allocator<char> >, long, std::less<std::__cxx11::basic_string<char, \
                  std::char_traits<char>, std::allocator<char> > >, \
                  std::allocator<std::pair<std::__cxx11::basic_string<char, \
                  std::char_traits<char>, std::allocator<char> > const, long> > \
                  >::operator[](std::__cxx11::basic_string<char, std::char_traits<char>, \
                  std::allocator<char> > const&)";
        assert_eq!(
            short_name(op, 200),
            "std::map<std::string, long, std::less<std::string>, \
             std::allocator<std::pair<std::string const, long> > >::operator[](std::string const&)"
        );
        assert_eq!(
            short_name(op, 100),
            "std::map<std::string, long, std::less<…>, std::allocator<…> \
             >::operator[](std::string const&)"
        );
        assert_eq!(
            short_name(op, 60),
            "std::map<…>::operator[](std::string const&)"
        );
        assert_eq!(short_name(op, 40), "std::map<…>::operator[](…)");
        // A short name keeps its typedef spelled out only when it fits: here it is replaced.
        assert_eq!(
            short_name("f(std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >)", 60),
            "f(std::string)"
        );
    }

    #[test]
    fn operators_are_not_brackets() {
        let n = "std::basic_ostream<char, std::char_traits<char> >& std::operator<< \
                 <std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char const*)";
        assert_eq!(
            short_name(n, 200),
            "std::ostream& std::operator<< <std::char_traits<char> >(std::ostream&, char const*)"
        );
        assert_eq!(
            short_name(n, 50),
            "std::ostream& std::operator<< <…>(std::ostream&, char const*)"
        );
        assert_eq!(
            collapse_templates("a<int>::operator->()", 1),
            "a<…>::operator->()"
        );
        assert_eq!(
            collapse_templates("my_operator<int>::f()", 1),
            "my_operator<…>::f()"
        );
        assert_eq!(
            collapse_templates("operator<=(x<y<z> >)", 2),
            "operator<=(x<y<…> >)"
        );
        // Lambdas' and anonymous namespaces' braces and parentheses pass through.
        assert_eq!(
            collapse_templates("f<{lambda(auto:1&)#1}>({lambda(auto:1&)#1})", 1),
            "f<…>({lambda(auto:1&)#1})"
        );
    }
}
