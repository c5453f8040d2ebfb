//! What a batch shows: the live progress line on stderr (a terminal), one line per finished
//! task otherwise (the batch's [`Observer`]), and the summary table on stdout.

use keel_batch::{Counters, Observer};
use serde_json::Value;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// The progress line and the batch's lines on stderr.
pub struct Progress {
    tty: bool,
    started: Instant,
    last_draw: Option<Instant>,
}

impl Progress {
    /// Progress from now.
    pub fn new() -> Self {
        Progress {
            tty: std::io::stderr().is_terminal(),
            started: Instant::now(),
            last_draw: None,
        }
    }

    /// Redraw the line (a terminal, at most 5 times a second; `force` now).
    fn draw(&mut self, c: &Counters, force: bool) {
        if !self.tty {
            return;
        }
        let now = Instant::now();
        if !force
            && self
                .last_draw
                .is_some_and(|t| now - t < Duration::from_millis(200))
        {
            return;
        }
        self.last_draw = Some(now);
        let elapsed = self.started.elapsed();
        let eta = match c.done {
            0 => "?".to_owned(),
            done => {
                let left = c.total.saturating_sub(done) as f64;
                secs(elapsed.as_secs_f64() / done as f64 * left)
            }
        };
        let _ = write!(
            std::io::stderr().lock(),
            "\r\x1b[Kkeel batch: {}/{} done, {} running, {} failed · {} tokens · {} · {} elapsed, ETA {}",
            c.done,
            c.total,
            c.running,
            c.failed,
            tokens(c.tokens),
            match (c.unpriced, c.cost > 0.0) {
                (false, _) => format!("${:.4}", c.cost),
                (true, false) => "cost unknown".to_owned(),
                (true, true) => format!("${:.4} partial", c.cost),
            },
            secs(elapsed.as_secs_f64()),
            eta
        );
    }
}

impl Observer for Progress {
    /// One line above the live line on a terminal.
    fn say(&mut self, line: &str, counters: &Counters) {
        let mut err = std::io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[K");
        }
        let _ = writeln!(err, "keel batch: {line}");
        drop(err);
        self.draw(counters, true);
    }

    fn update(&mut self, counters: &Counters, now: bool) {
        self.draw(counters, now);
    }

    /// End the live line.
    fn finish(&mut self) {
        if self.tty {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[K");
        }
    }
}

/// `12.3k`-style token counts.
pub fn tokens(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.2}M", n as f64 / 1e6),
    }
}

/// `3.2s`, `4m05s`.
pub fn secs(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.1}s")
    } else {
        let whole = s as u64;
        format!("{}m{:02}s", whole / 60, whole % 60)
    }
}

/// The summary table of `results` (results.jsonl's lines, in order) on `out`.
pub fn summary(out: &mut impl Write, results: &[Value]) -> std::io::Result<()> {
    let width = results
        .iter()
        .map(|r| id_of(r).chars().count())
        .max()
        .unwrap_or(2)
        .max(2);
    writeln!(
        out,
        "{:<width$}  {:<11}  {:<7}  {:>5}  {:>8}  {:>8}  {:>9}  {:>7}",
        "id", "outcome", "check", "turns", "requests", "tokens", "cost", "wall"
    )?;
    let (mut completed, mut passed, mut checked, mut total_tokens) = (0, 0, 0, 0u64);
    let mut total_cost = Total::default();
    for r in results {
        let num = |k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
        let outcome = r.get("outcome").and_then(Value::as_str).unwrap_or("?");
        let check = r.get("check").and_then(Value::as_str);
        let tok = r
            .get("tokens")
            .map(|t| {
                t.get("prompt").and_then(Value::as_u64).unwrap_or(0)
                    + t.get("output").and_then(Value::as_u64).unwrap_or(0)
            })
            .unwrap_or(0);
        let cost = r.get("cost_usd").and_then(Value::as_f64);
        completed += usize::from(outcome == "completed");
        checked += usize::from(check.is_some());
        passed += usize::from(check == Some("passed"));
        total_tokens += tok;
        total_cost.add(cost, r.get("model").and_then(Value::as_str));
        writeln!(
            out,
            "{:<width$}  {:<11}  {:<7}  {:>5}  {:>8}  {:>8}  {:>9}  {:>7}",
            id_of(r),
            outcome,
            check.unwrap_or("-"),
            num("turns"),
            num("requests"),
            tokens(tok),
            cost.map(|c| format!("${c:.4}"))
                .unwrap_or_else(|| "-".into()),
            secs(num("wall_ms") as f64 / 1000.0),
        )?;
    }
    writeln!(
        out,
        "{} tasks: {completed} completed, {} not; checks {passed}/{checked} passed; {} tokens, {}",
        results.len(),
        results.len() - completed,
        tokens(total_tokens),
        total_cost.said(),
    )
}

/// The batch's cost: the sum of the priced tasks, and the models of those without a price.
#[derive(Debug, Default)]
struct Total {
    usd: f64,
    priced: usize,
    unpriced: Vec<String>,
}

impl Total {
    fn add(&mut self, cost: Option<f64>, model: Option<&str>) {
        match cost {
            Some(c) => {
                self.usd += c;
                self.priced += 1;
            }
            None => {
                let model = model.unwrap_or("?").to_owned();
                if !self.unpriced.contains(&model) {
                    self.unpriced.push(model);
                }
            }
        }
    }

    /// `$1.2345`; `cost unknown (no price for M)` when no task has a price; `$0.1234 so far
    /// (partial: no price for M)` when some have none.
    fn said(&self) -> String {
        let models = self.unpriced.join(", ");
        match (self.priced, self.unpriced.is_empty()) {
            (_, true) => format!("${:.4}", self.usd),
            (0, false) => format!("cost unknown (no price for {models})"),
            (_, false) => format!(
                "${:.4} partial (no price for {models}: its tasks are not counted)",
                self.usd
            ),
        }
    }
}

fn id_of(r: &Value) -> String {
    match r.get("id").and_then(Value::as_str) {
        Some(id) => id.to_owned(),
        None => format!(
            "line {}",
            r.get("line").and_then(Value::as_u64).unwrap_or(0)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn total_line(results: &[Value]) -> String {
        let mut out = Vec::new();
        summary(&mut out, results).unwrap();
        let text = String::from_utf8(out).unwrap();
        text.lines().last().unwrap().to_owned()
    }

    #[test]
    fn the_total_says_when_a_price_is_unknown() {
        let priced = json!({"id": "a", "outcome": "completed", "model": "m1", "cost_usd": 0.5});
        let unpriced = json!({"id": "b", "outcome": "completed", "model": "m2", "cost_usd": null});
        assert!(total_line(std::slice::from_ref(&priced)).ends_with(", $0.5000"));
        assert!(
            total_line(&[unpriced.clone(), unpriced.clone()])
                .ends_with(", cost unknown (no price for m2)")
        );
        let both = total_line(&[priced, unpriced]);
        assert!(
            both.ends_with("$0.5000 partial (no price for m2: its tasks are not counted)"),
            "{both}"
        );
    }
}
