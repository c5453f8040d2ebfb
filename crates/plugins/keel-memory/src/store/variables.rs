//! Variables: named JSON values per scope, written compare-and-swap.
//!
//! Scopes: `turn` (held in memory, per session; cleared when the session's turn ends),
//! `session`, `project`, `agent`, `global` (in the `variables` table, scope ids as for
//! records). A patch is a list of ≤ 32 changes `{op: "set", path, value}` /
//! `{op: "delete", path}` where `path` is a JSON Pointer (RFC 6901: `""` is the whole value,
//! `/a/0/b` walks objects and arrays, `-` appends to an array); `set` creates missing objects
//! on the way, `delete` of a missing path is an error naming the change.

use super::records::{FieldError, Scope, field_err, revision_of, rfc3339};
use super::sqlite::{Identity, MemoryStore, StoreError, audit};
use keel_protocol::sync::Locked;
use rusqlite::{OptionalExtension, TransactionBehavior, params};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// Largest serialized value, in bytes.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Most changes in one patch.
pub const MAX_PATCH_CHANGES: usize = 32;
/// Longest name, in bytes.
pub const MAX_NAME_BYTES: usize = 128;

/// A variable's scope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VarScope {
    /// This turn of this session (in memory; gone at `turn/end`).
    Turn,
    /// A record scope.
    Stored(Scope),
}

impl VarScope {
    /// Parse a spelling (`turn`, `session`, `project`, `agent`, `global`).
    pub fn parse(s: &str) -> Option<VarScope> {
        if s == "turn" {
            return Some(VarScope::Turn);
        }
        Scope::parse(s).map(VarScope::Stored)
    }

    /// Its spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            VarScope::Turn => "turn",
            VarScope::Stored(s) => s.as_str(),
        }
    }
}

/// One variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Var {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: Value,
    /// First 16 hex of the SHA-256 of the canonical `{scope, scope_id, name, value, updated_at}`.
    pub revision: String,
    /// RFC 3339 UTC.
    pub updated_at: String,
}

/// One change of a patch.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum Change {
    /// Set the value at `path` (creating objects on the way).
    Set {
        /// JSON Pointer.
        path: String,
        /// The new value.
        value: Value,
    },
    /// Remove the value at `path`.
    Delete {
        /// JSON Pointer.
        path: String,
    },
}

/// What a write does.
#[derive(Debug, Clone)]
pub enum VarOp {
    /// Replace the value.
    Set(Value),
    /// Apply changes to the value (an unset variable starts as `{}`).
    Patch(Vec<Change>),
    /// Remove the variable.
    Delete,
}

impl VarOp {
    fn audit_name(&self) -> &'static str {
        match self {
            VarOp::Set(_) => "variable_set",
            VarOp::Patch(_) => "variable_patch",
            VarOp::Delete => "variable_delete",
        }
    }
}

/// Check a variable name: 1..=128 bytes of letters, digits, `_ . : -`.
pub fn check_name(name: &str) -> Result<(), FieldError> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(field_err(
            "name",
            format!("must be 1..={MAX_NAME_BYTES} bytes"),
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
    {
        return Err(field_err(
            "name",
            format!("{c:?} is not allowed (letters, digits, _ . : -)"),
        ));
    }
    Ok(())
}

/// The new state of a variable after `op`, checked against `expected` (`None`: no check).
/// `Ok(None)`: the variable is deleted.
pub fn apply(
    scope: VarScope,
    scope_id: &str,
    name: &str,
    current: Option<&Var>,
    op: &VarOp,
    expected: Option<&str>,
    now: i64,
) -> Result<Option<Var>, StoreError> {
    check_name(name)?;
    if let Some(exp) = expected
        && current.map(|v| v.revision.as_str()) != Some(exp)
    {
        return Err(StoreError::VariableConflict {
            name: name.to_owned(),
            expected: exp.to_owned(),
            current: current.map(|v| v.revision.clone()),
        });
    }
    let value = match op {
        VarOp::Delete => {
            if current.is_none() {
                return Err(field_err("name", format!("variable {name} is not set")).into());
            }
            return Ok(None);
        }
        VarOp::Set(v) => v.clone(),
        VarOp::Patch(changes) => {
            if changes.len() > MAX_PATCH_CHANGES {
                return Err(field_err(
                    "changes",
                    format!(
                        "{} changes; the limit is {MAX_PATCH_CHANGES}",
                        changes.len()
                    ),
                )
                .into());
            }
            let mut v = current.map_or_else(|| json!({}), |c| c.value.clone());
            for (i, c) in changes.iter().enumerate() {
                apply_change(&mut v, c).map_err(|m| field_err("changes", format!("[{i}] {m}")))?;
            }
            v
        }
    };
    let bytes = serde_json::to_vec(&value).map_or(usize::MAX, |b| b.len());
    if bytes > MAX_VALUE_BYTES {
        return Err(field_err(
            "value",
            format!("is {bytes} bytes of JSON; the limit is {MAX_VALUE_BYTES} (64 KiB)"),
        )
        .into());
    }
    let updated_at = rfc3339(now);
    let revision = revision_of(&json!({
        "scope": scope.as_str(), "scope_id": scope_id, "name": name,
        "value": value, "updated_at": updated_at,
    }));
    Ok(Some(Var {
        name: name.to_owned(),
        value,
        revision,
        updated_at,
    }))
}

fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Why one change of a `patch` cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum PatchError {
    /// A delete of the path `""`.
    #[error("path \"\" (the whole value) cannot be deleted; use variable_delete")]
    DeleteWhole,
    /// A path that does not start with `/`.
    #[error("path {path:?} is not a JSON Pointer (starts with /)")]
    NotAPointer { path: String },
    /// A pointer without tokens.
    #[error("empty path")]
    EmptyPath,
    /// A key that is not there.
    #[error("path {path:?}: {token:?} not found")]
    NotFound { path: String, token: String },
    /// A token that should index an array and does not.
    #[error("path {path:?}: {token:?} is not an array index")]
    NotAnIndex { path: String, token: String },
    /// An index past the end of an array.
    #[error("path {path:?}: index {index} is past the end ({len})")]
    PastTheEnd {
        path: String,
        index: usize,
        len: usize,
    },
    /// A token below a scalar.
    #[error("path {path:?}: {token:?} is inside a scalar")]
    InsideScalar { path: String, token: String },
    /// The last token's parent is a scalar.
    #[error("path {path:?}: the parent is a scalar")]
    ParentIsScalar { path: String },
}

fn apply_change(root: &mut Value, change: &Change) -> Result<(), PatchError> {
    let (path, new) = match change {
        Change::Set { path, value } => (path, Some(value.clone())),
        Change::Delete { path } => (path, None),
    };
    if path.is_empty() {
        return match new {
            Some(v) => {
                *root = v;
                Ok(())
            }
            None => Err(PatchError::DeleteWhole),
        };
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(PatchError::NotAPointer { path: path.clone() });
    };
    let tokens: Vec<String> = rest.split('/').map(unescape).collect();
    let (last, parents) = tokens.split_last().ok_or(PatchError::EmptyPath)?;
    let mut cur = root;
    for t in parents {
        if cur.is_null() && new.is_some() {
            *cur = Value::Object(Map::new());
        }
        cur = match cur {
            Value::Object(m) => {
                if new.is_some() {
                    m.entry(t.clone())
                        .or_insert_with(|| Value::Object(Map::new()))
                } else {
                    m.get_mut(t).ok_or_else(|| PatchError::NotFound {
                        path: path.clone(),
                        token: t.clone(),
                    })?
                }
            }
            Value::Array(a) => {
                let i: usize = t.parse().map_err(|_| PatchError::NotAnIndex {
                    path: path.clone(),
                    token: t.clone(),
                })?;
                let len = a.len();
                a.get_mut(i).ok_or_else(|| PatchError::PastTheEnd {
                    path: path.clone(),
                    index: i,
                    len,
                })?
            }
            _ => {
                return Err(PatchError::InsideScalar {
                    path: path.clone(),
                    token: t.clone(),
                });
            }
        };
    }
    if cur.is_null() && new.is_some() {
        *cur = Value::Object(Map::new());
    }
    match (cur, new) {
        (Value::Object(m), Some(v)) => {
            m.insert(last.clone(), v);
        }
        (Value::Object(m), None) => {
            m.remove(last).ok_or_else(|| PatchError::NotFound {
                path: path.clone(),
                token: last.clone(),
            })?;
        }
        (Value::Array(a), Some(v)) if last == "-" => a.push(v),
        (Value::Array(a), new) => {
            let i: usize = last.parse().map_err(|_| PatchError::NotAnIndex {
                path: path.clone(),
                token: last.clone(),
            })?;
            match new {
                Some(v) if i < a.len() => a[i] = v,
                Some(v) if i == a.len() => a.push(v),
                None if i < a.len() => {
                    a.remove(i);
                }
                _ => {
                    return Err(PatchError::PastTheEnd {
                        path: path.clone(),
                        index: i,
                        len: a.len(),
                    });
                }
            }
        }
        _ => return Err(PatchError::ParentIsScalar { path: path.clone() }),
    }
    Ok(())
}

/// A variable's listing: name, revision, JSON size, last change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarInfo {
    /// Name.
    pub name: String,
    /// Revision.
    pub revision: String,
    /// Serialized size in bytes.
    pub bytes: usize,
    /// RFC 3339.
    pub updated_at: String,
}

impl MemoryStore {
    /// Variable `name` of the stored scope `scope`.
    pub fn var_get(
        &self,
        who: &Identity,
        scope: Scope,
        name: &str,
    ) -> Result<Option<Var>, StoreError> {
        let conn = self.conn();
        load_var(&conn, &who.skey(scope), name).map_err(|e| self.sql(e))
    }

    /// Write variable `name` of `scope` with `op`, compare-and-swap on `expected`; returns the
    /// new state (`None`: deleted).
    pub fn var_write(
        &self,
        who: &Identity,
        scope: Scope,
        name: &str,
        op: &VarOp,
        expected: Option<&str>,
        now: i64,
    ) -> Result<Option<Var>, StoreError> {
        self.check_writable(scope)?;
        let skey = who.skey(scope);
        let mut conn = self.conn();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sql(e))?;
        let current = load_var(&tx, &skey, name).map_err(|e| self.sql(e))?;
        let next = apply(
            VarScope::Stored(scope),
            who.scope_id(scope),
            name,
            current.as_ref(),
            op,
            expected,
            now,
        )?;
        match &next {
            Some(v) => tx
                .prepare_cached("INSERT OR REPLACE INTO variables(skey, name, revision, updated_at, value) VALUES (?1, ?2, ?3, ?4, ?5)")
                .and_then(|mut st| st.execute(params![skey, name, v.revision, v.updated_at, v.value.to_string()]))
                .map_err(|e| self.sql(e))?,
            None => tx
                .prepare_cached("DELETE FROM variables WHERE skey = ?1 AND name = ?2")
                .and_then(|mut st| st.execute(params![skey, name]))
                .map_err(|e| self.sql(e))?,
        };
        audit(
            &tx,
            &rfc3339(now),
            who,
            op.audit_name(),
            name,
            scope.as_str(),
            who.scope_id(scope),
            current.as_ref().map(|v| v.revision.as_str()),
            next.as_ref().map(|v| v.revision.as_str()),
        )
        .map_err(|e| self.sql(e))?;
        tx.commit().map_err(|e| self.sql(e))?;
        Ok(next)
    }

    /// The variables of `scope`, by name.
    pub fn var_list(&self, who: &Identity, scope: Scope) -> Result<Vec<VarInfo>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare_cached(
                "SELECT name, revision, length(value), updated_at FROM variables WHERE skey = ?1 ORDER BY name",
            )
            .map_err(|e| self.sql(e))?;
        let rows = st
            .query_map(params![who.skey(scope)], |r| {
                Ok(VarInfo {
                    name: r.get(0)?,
                    revision: r.get(1)?,
                    bytes: r
                        .get::<_, i64>(2)
                        .map(|n| usize::try_from(n).unwrap_or(0))?,
                    updated_at: r.get(3)?,
                })
            })
            .map_err(|e| self.sql(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.sql(e))
    }
}

fn load_var(conn: &rusqlite::Connection, skey: &str, name: &str) -> rusqlite::Result<Option<Var>> {
    conn.prepare_cached(
        "SELECT revision, updated_at, value FROM variables WHERE skey = ?1 AND name = ?2",
    )?
    .query_row(params![skey, name], |r| {
        let value: String = r.get(2)?;
        Ok(Var {
            name: name.to_owned(),
            value: serde_json::from_str(&value).unwrap_or(Value::Null),
            revision: r.get(0)?,
            updated_at: r.get(1)?,
        })
    })
    .optional()
}

/// One session's turn variables: the turn they belong to and the values by name.
type TurnEntry = (u32, BTreeMap<String, Var>);

/// Turn-scope variables: per session, the turn they belong to and their values. A session's
/// entry is dropped at its `turn/end`; an entry of an older turn is also ignored on access.
#[derive(Debug, Default)]
pub struct TurnVars {
    map: Mutex<HashMap<String, TurnEntry>>,
}

impl TurnVars {
    fn with<R>(
        &self,
        session: &str,
        turn: u32,
        f: impl FnOnce(&mut BTreeMap<String, Var>) -> R,
    ) -> R {
        let mut map = self.map.locked();
        let entry = map
            .entry(session.to_owned())
            .or_insert_with(|| (turn, BTreeMap::new()));
        if entry.0 != turn {
            *entry = (turn, BTreeMap::new());
        }
        f(&mut entry.1)
    }

    /// Variable `name` of `session`'s turn `turn`.
    pub fn get(&self, session: &str, turn: u32, name: &str) -> Option<Var> {
        self.with(session, turn, |m| m.get(name).cloned())
    }

    /// Write variable `name` of `session`'s turn `turn` (CAS on `expected`).
    pub fn write(
        &self,
        session: &str,
        turn: u32,
        name: &str,
        op: &VarOp,
        expected: Option<&str>,
        now: i64,
    ) -> Result<Option<Var>, StoreError> {
        self.with(session, turn, |m| {
            let next = apply(
                VarScope::Turn,
                session,
                name,
                m.get(name),
                op,
                expected,
                now,
            )?;
            match &next {
                Some(v) => {
                    m.insert(name.to_owned(), v.clone());
                }
                None => {
                    m.remove(name);
                }
            }
            Ok(next)
        })
    }

    /// The variables of `session`'s turn `turn`.
    pub fn list(&self, session: &str, turn: u32) -> Vec<VarInfo> {
        self.with(session, turn, |m| {
            m.values()
                .map(|v| VarInfo {
                    name: v.name.clone(),
                    revision: v.revision.clone(),
                    bytes: v.value.to_string().len(),
                    updated_at: v.updated_at.clone(),
                })
                .collect()
        })
    }

    /// Drop `session`'s turn variables (its turn ended).
    pub fn clear(&self, session: &str) {
        self.map.locked().remove(session);
    }

    /// How many sessions hold turn variables.
    pub fn sessions(&self) -> usize {
        self.map.locked().len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn patch(v: Value, changes: Value) -> Result<Value, StoreError> {
        let changes: Vec<Change> = serde_json::from_value(changes).unwrap();
        let cur = Var {
            name: "x".into(),
            value: v,
            revision: "r".into(),
            updated_at: String::new(),
        };
        apply(
            VarScope::Turn,
            "s",
            "x",
            Some(&cur),
            &VarOp::Patch(changes),
            None,
            0,
        )
        .map(|v| v.unwrap().value)
    }

    #[test]
    fn patches_set_and_delete_by_json_pointer() {
        let v = patch(
            json!({"a": {"b": 1}, "l": [1, 2]}),
            json!([
                {"op": "set", "path": "/a/c", "value": true},
                {"op": "delete", "path": "/a/b"},
                {"op": "set", "path": "/l/-", "value": 3},
                {"op": "delete", "path": "/l/0"},
                {"op": "set", "path": "/new/deep", "value": "x"},
                {"op": "set", "path": "/a~1b", "value": 0}
            ]),
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"a": {"c": true}, "l": [2, 3], "new": {"deep": "x"}, "a/b": 0})
        );
        let e = patch(json!({}), json!([{"op": "delete", "path": "/nope"}]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("changes: [0]") && e.contains("not found"), "{e}");
        let e = patch(
            json!({"s": 1}),
            json!([{"op": "set", "path": "/s/x", "value": 1}]),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("scalar"), "{e}");
        let many: Vec<Value> = (0..33)
            .map(|i| json!({"op": "set", "path": format!("/k{i}"), "value": i}))
            .collect();
        let e = patch(json!({}), Value::Array(many))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("changes: 33 changes"), "{e}");
    }

    #[test]
    fn turn_variables_belong_to_one_turn() {
        let t = TurnVars::default();
        t.write("s1", 1, "x", &VarOp::Set(json!(1)), None, 0)
            .unwrap();
        assert!(t.get("s1", 1, "x").is_some());
        assert!(t.get("s2", 1, "x").is_none());
        assert!(t.get("s1", 2, "x").is_none());
        t.write("s1", 2, "y", &VarOp::Set(json!(1)), None, 0)
            .unwrap();
        t.clear("s1");
        assert!(t.get("s1", 2, "y").is_none());
    }
}
