//! The expression language of `translatePatches`: the new value of a string field computed
//! from its current one. Deliberately small — every expression is a string, nothing loops,
//! nothing fails once parsed:
//!
//! ```text
//! expression := term ('+' term)*          concatenation
//! term       := 'text' | "text"           a literal (\' \" \\ escape)
//!             | value                     the field's current value
//!             | name '(' expression, ... ')'
//! ```
//!
//! Functions: `lower(s)`, `upper(s)`, `replace(s, old, new)` (every occurrence),
//! `trimPrefix(s, prefix)`, `trimSuffix(s, suffix)` (once, when present). The seed's example
//! `'vcluster-' + value` turns `web` into `vcluster-web`.

use std::fmt;

/// A parsed expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expression(Node);

#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    Literal(String),
    Value,
    Concat(Vec<Node>),
    Call(Function, Vec<Node>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Function {
    Lower,
    Upper,
    Replace,
    TrimPrefix,
    TrimSuffix,
}

const FUNCTIONS: [(&str, Function, usize); 5] = [
    ("lower", Function::Lower, 1),
    ("upper", Function::Upper, 1),
    ("replace", Function::Replace, 3),
    ("trimPrefix", Function::TrimPrefix, 2),
    ("trimSuffix", Function::TrimSuffix, 2),
];

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = FUNCTIONS
            .iter()
            .find(|(_, g, _)| g == self)
            .map(|(n, _, _)| *n);
        f.write_str(name.unwrap_or_default())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Str(String),
    Name(String),
    Plus,
    Open,
    Close,
    Comma,
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Str(s) => write!(f, "{s:?}"),
            Token::Name(n) => f.write_str(n),
            Token::Plus => f.write_str("'+'"),
            Token::Open => f.write_str("'('"),
            Token::Close => f.write_str("')'"),
            Token::Comma => f.write_str("','"),
        }
    }
}

/// Tokens with the (1-based) character each starts at.
fn tokenize(text: &str) -> Result<Vec<(usize, Token)>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let at = i + 1;
        let c = chars[i];
        let token = match c {
            c if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '+' => Token::Plus,
            '(' => Token::Open,
            ')' => Token::Close,
            ',' => Token::Comma,
            '\'' | '"' => {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(format!(
                                "the string starting at character {at} is never closed"
                            ));
                        }
                        Some(&q) if q == c => break,
                        Some('\\') => match chars.get(i + 1) {
                            Some(&e @ ('\\' | '\'' | '"')) => {
                                s.push(e);
                                i += 1;
                            }
                            _ => {
                                return Err(format!(
                                    "unknown escape at character {}; only \\\\, \\' and \\\" are escapes",
                                    i + 1
                                ));
                            }
                        },
                        Some(&other) => s.push(other),
                    }
                    i += 1;
                }
                Token::Str(s)
            }
            c if c.is_ascii_alphabetic() || c == '_' => {
                let start = i;
                while chars
                    .get(i + 1)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    i += 1;
                }
                Token::Name(chars[start..=i].iter().collect())
            }
            other => {
                return Err(format!(
                    "unexpected {other:?} at character {at}; an expression joins 'strings', value and function calls with +"
                ));
            }
        };
        tokens.push((at, token));
        i += 1;
    }
    Ok(tokens)
}

struct Parser {
    tokens: Vec<(usize, Token)>,
    next: usize,
    /// Character just past the end, for "ended early" errors.
    end: usize,
}

impl Parser {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.next).map(|(_, t)| t)
    }

    fn take(&mut self) -> Option<(usize, Token)> {
        let t = self.tokens.get(self.next).cloned();
        self.next += 1;
        t
    }

    fn expression(&mut self) -> Result<Node, String> {
        let mut terms = vec![self.term()?];
        while self.peek() == Some(&Token::Plus) {
            self.next += 1;
            terms.push(self.term()?);
        }
        Ok(if terms.len() == 1 {
            terms.remove(0)
        } else {
            Node::Concat(terms)
        })
    }

    fn term(&mut self) -> Result<Node, String> {
        match self.take() {
            Some((_, Token::Str(s))) => Ok(Node::Literal(s)),
            Some((_, Token::Name(n))) if n == "value" => Ok(Node::Value),
            Some((at, Token::Name(n))) => {
                let Some(&(_, function, arity)) = FUNCTIONS.iter().find(|(name, _, _)| *name == n)
                else {
                    let names: Vec<&str> = FUNCTIONS.iter().map(|(n, _, _)| *n).collect();
                    return Err(format!(
                        "unknown name {n} at character {at}; use value or one of the functions {}",
                        names.join(", ")
                    ));
                };
                match self.take() {
                    Some((_, Token::Open)) => {}
                    _ => return Err(format!("{n} at character {at} must be called: {n}(...)")),
                }
                let mut args = Vec::new();
                if self.peek() != Some(&Token::Close) {
                    args.push(self.expression()?);
                    while self.peek() == Some(&Token::Comma) {
                        self.next += 1;
                        args.push(self.expression()?);
                    }
                }
                match self.take() {
                    Some((_, Token::Close)) => {}
                    Some((p, t)) => {
                        return Err(format!("expected ',' or ')' at character {p}, found {t}"));
                    }
                    None => {
                        return Err(format!("the call of {n} at character {at} is never closed"));
                    }
                }
                if args.len() != arity {
                    return Err(format!(
                        "{function} takes {arity} argument{}, got {} (at character {at})",
                        if arity == 1 { "" } else { "s" },
                        args.len()
                    ));
                }
                Ok(Node::Call(function, args))
            }
            Some((at, t)) => Err(format!(
                "expected a 'string', value or a function call at character {at}, found {t}"
            )),
            None => Err(format!(
                "expected a 'string', value or a function call at character {}, found the end",
                self.end
            )),
        }
    }
}

impl Expression {
    /// Parses `text`; the error says where and what was expected.
    pub fn parse(text: &str) -> Result<Expression, String> {
        let mut parser = Parser {
            tokens: tokenize(text)?,
            next: 0,
            end: text.chars().count() + 1,
        };
        let node = parser.expression()?;
        if let Some((at, t)) = parser.take() {
            return Err(format!(
                "unexpected {t} at character {at}; join parts with +"
            ));
        }
        Ok(Expression(node))
    }

    /// The new value of a field whose current value is `value`.
    pub fn evaluate(&self, value: &str) -> String {
        eval(&self.0, value)
    }
}

fn eval(node: &Node, value: &str) -> String {
    match node {
        Node::Literal(s) => s.clone(),
        Node::Value => value.to_string(),
        Node::Concat(parts) => parts.iter().map(|p| eval(p, value)).collect(),
        Node::Call(function, args) => {
            let a: Vec<String> = args.iter().map(|n| eval(n, value)).collect();
            match function {
                Function::Lower => a[0].to_lowercase(),
                Function::Upper => a[0].to_uppercase(),
                Function::Replace if a[1].is_empty() => a[0].clone(),
                Function::Replace => a[0].replace(&a[1], &a[2]),
                Function::TrimPrefix => a[0].strip_prefix(&a[1]).unwrap_or(&a[0]).to_string(),
                Function::TrimSuffix => a[0].strip_suffix(&a[1]).unwrap_or(&a[0]).to_string(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(text: &str, value: &str) -> String {
        Expression::parse(text)
            .unwrap_or_else(|e| panic!("{text}: {e}"))
            .evaluate(value)
    }

    fn error(text: &str) -> String {
        Expression::parse(text).unwrap_err()
    }

    /// The seed's example prefixes the label value.
    #[test]
    fn the_seeds_example_prefixes_the_value() {
        assert_eq!(eval("'vcluster-' + value", "web"), "vcluster-web");
    }

    #[test]
    fn literals_value_and_concatenation() {
        assert_eq!(eval("value", "web"), "web");
        assert_eq!(eval("'fixed'", "web"), "fixed");
        assert_eq!(eval(r#""a" + value + 'b' + value"#, "x"), "axbx");
        assert_eq!(eval("  value+'-'+value  ", "x"), "x-x");
        assert_eq!(eval("''", "x"), "");
    }

    /// Quotes and backslashes can be written inside strings.
    #[test]
    fn escapes_inside_strings() {
        assert_eq!(eval(r#"'it\'s' + "\"q\"" + '\\'"#, ""), r#"it's"q"\"#);
        assert_eq!(eval(r#"'say "hi"'"#, ""), r#"say "hi""#);
    }

    #[test]
    fn each_function_does_what_it_says() {
        assert_eq!(eval("lower(value)", "WeB"), "web");
        assert_eq!(eval("upper(value)", "WeB"), "WEB");
        assert_eq!(eval("replace(value, '.', '-')", "a.b.c"), "a-b-c");
        assert_eq!(eval("replace(value, '', 'x')", "ab"), "ab");
        assert_eq!(eval("trimPrefix(value, 'team-')", "team-web"), "web");
        assert_eq!(eval("trimPrefix(value, 'team-')", "web-team-"), "web-team-");
        assert_eq!(eval("trimSuffix(value, '-v1')", "web-v1-v1"), "web-v1");
    }

    /// Calls nest and take whole expressions as arguments.
    #[test]
    fn calls_nest() {
        assert_eq!(
            eval("upper(trimPrefix('x-' + value, 'x-')) + '!'", "web"),
            "WEB!"
        );
        assert_eq!(
            eval("lower(replace(value, 'A', 'B' + 'C'))", "AaA"),
            "bcabc"
        );
    }

    /// Every parse error says where and what was wrong.
    #[test]
    fn bad_expressions_are_refused_with_the_position() {
        assert_eq!(
            error("'vcluster-' +"),
            "expected a 'string', value or a function call at character 14, found the end"
        );
        assert_eq!(
            error("'vcluster-"),
            "the string starting at character 1 is never closed"
        );
        assert!(error("vaule").starts_with("unknown name vaule at character 1; use value or one of the functions lower, upper, replace, trimPrefix, trimSuffix"));
        assert_eq!(
            error("'a' 'b'"),
            "unexpected \"b\" at character 5; join parts with +"
        );
        assert!(error("value - 'x'").starts_with("unexpected '-' at character 7"));
        assert_eq!(
            error("lower"),
            "lower at character 1 must be called: lower(...)"
        );
        assert_eq!(
            error("replace(value, 'a')"),
            "replace takes 3 arguments, got 2 (at character 1)"
        );
        assert_eq!(
            error("upper()"),
            "upper takes 1 argument, got 0 (at character 1)"
        );
        assert_eq!(
            error("upper(value"),
            "the call of upper at character 1 is never closed"
        );
        assert_eq!(
            error("upper(value value)"),
            "expected ',' or ')' at character 13, found value"
        );
        assert!(error(r"'\n'").starts_with("unknown escape at character 2"));
        assert!(error("").starts_with("expected a 'string'"));
        assert!(error("+ value").contains("found '+'"));
    }

    /// Non-ASCII text is kept and positions count characters, not bytes.
    #[test]
    fn unicode_is_kept_and_positions_count_characters() {
        assert_eq!(eval("'é-' + value", "ü"), "é-ü");
        assert_eq!(
            error("'é' +"),
            "expected a 'string', value or a function call at character 6, found the end"
        );
    }
}
