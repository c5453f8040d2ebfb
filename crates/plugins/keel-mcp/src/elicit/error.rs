//! Why a server's form cannot be asked, and why the answers do not fill it: each names the field.

use super::MAX_FIELDS;
use serde_json::Value;

/// Why keel cannot ask a form ([`super::Form::parse`]), naming the field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FormError {
    /// The schema is not a JSON object.
    #[error("the requested schema is not an object")]
    NotAnObject,
    /// The schema's `type` is not `"object"`.
    #[error("the requested schema has type {0}, not \"object\"")]
    NotObjectType(Value),
    /// `properties` is not an object.
    #[error("`properties` is not an object but {0}")]
    Properties(Value),
    /// More fields than keel asks.
    #[error("the form has {fields} fields (keel asks at most {})", MAX_FIELDS)]
    TooMany {
        /// How many it has.
        fields: usize,
    },
    /// A field whose schema is not an object.
    #[error("field '{0}' is not a schema")]
    NotASchema(String),
    /// An array field whose items are not enum strings.
    #[error("field '{0}' is an array of free values, which keel cannot ask (only of enum strings)")]
    FreeArray(String),
    /// A field of a type keel cannot ask.
    #[error(
        "field '{field}' has type \"{ty}\", which keel cannot ask (string, number, integer, boolean, enum)"
    )]
    Unaskable {
        /// The field.
        field: String,
        /// Its type.
        ty: String,
    },
    /// A field without a `type`.
    #[error("field '{0}' has no `type`")]
    NoType(String),
    /// A field's `enum`, `oneOf` or `anyOf` is not an array.
    #[error("field '{field}': `{key}` is not an array")]
    NotAnArray {
        /// The field.
        field: String,
        /// The key.
        key: &'static str,
    },
    /// A value of a field's `enum` that is not a string.
    #[error("field '{field}': enum value {value} is not a string")]
    EnumNotString {
        /// The field.
        field: String,
        /// The value.
        value: Value,
    },
    /// An entry of a field's `oneOf` or `anyOf` without a string `const`.
    #[error("field '{field}': a `{key}` entry has no string `const`")]
    NoConst {
        /// The field.
        field: String,
        /// `oneOf` or `anyOf`.
        key: &'static str,
    },
}

/// Why the answers do not fill a form ([`super::Form::content`]), naming the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// A required field without an answer or a default.
    #[error("field '{0}' is required and was not answered")]
    Required(String),
    /// A text answer outside the field's length limits.
    #[error("the answer for field '{field}' has {n} characters, outside its limits")]
    Length {
        /// The field.
        field: String,
        /// The answer's length in characters.
        n: u64,
    },
    /// An email field's answer without `@`.
    #[error("the answer for field '{0}' is not an email address")]
    NotEmail(String),
    /// An integer field's answer that is no whole number.
    #[error("the answer for field '{field}' ({given:?}) is not a whole number")]
    NotWhole {
        /// The field.
        field: String,
        /// The answer, trimmed.
        given: String,
    },
    /// A number field's answer that is no finite number.
    #[error("the answer for field '{field}' ({given:?}) is not a number")]
    NotNumber {
        /// The field.
        field: String,
        /// The answer, trimmed.
        given: String,
    },
    /// A number outside the field's limits.
    #[error("the answer for field '{field}' ({given}) is outside its limits")]
    OutOfRange {
        /// The field.
        field: String,
        /// The answer, trimmed.
        given: String,
    },
    /// A yes/no field's answer that is neither.
    #[error("the answer for field '{0}' is not yes or no")]
    NotYesOrNo(String),
    /// A choice that is none of the field's.
    #[error("the answer for field '{field}' ({given:?}) is not one of its choices")]
    NotAChoice {
        /// The field.
        field: String,
        /// The choice given.
        given: String,
    },
    /// A number of choices outside the field's limits.
    #[error("field '{field}' takes a different number of choices than {n}")]
    ChoiceCount {
        /// The field.
        field: String,
        /// The number given.
        n: u64,
    },
    /// Several answers for a field that takes one.
    #[error("field '{0}' takes one answer, not several")]
    NotSeveral(String),
}
