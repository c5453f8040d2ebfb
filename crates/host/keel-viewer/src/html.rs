//! The session page: keel-session's [`Transcript`] (every event as appended, so what compaction
//! later replaced is still shown, marked with what replaced it) walked into one HTML document,
//! with the inline stylesheet of `page.css` and no script at all.
//!
//! Data flow: [`render_html`] makes one pass over the log's whole events ([`Facts`]: usage per
//! step, tool results by seq, continuity boundaries the transcript does not place), builds the
//! transcript, then writes the header, each turn (its steps with their usage, messages, tool
//! calls as `<details>` holding the arguments, the result and, when a provenance journal is
//! given, the result's formation graph from [`crate::svg`]), and the markers (compaction,
//! interrupted turns repaired at resume, continuity re-projections, plan mode, todo lists).
//!
//! Elements carry `data-*` attributes (`data-seq`, `data-turn`, `data-step`, `data-call-id`,
//! `data-marker`, the graph's `data-id`s) so a program can check the page against the log.

use crate::escape::{capped, escaped, text};
use crate::facts::{Facts, thousands, usage_span};
use crate::svg::trace_svg;
use keel_protocol::{EventBody, PlanModeEvent, Seq, TodoStatus, TodoWrite};
use keel_provenance::query::{Direction, QueryError, QueryScope, trace_in};
use keel_session::Session;
use keel_session::view::text::{compact_args, one_line};
use keel_session::view::transcript::{Block, Call, Entry, Fate, Item, Origin, Transcript};
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// Bytes of one message, result, argument string or reasoning shown; the rest is counted.
const TEXT_CAP: usize = 64 * 1024;
/// Characters of a tool call's arguments in its one-line summary.
const BRIEF_ARGS: usize = 120;
/// Formation steps a tool result's graph walks back (`keel trace`'s default).
pub const GRAPH_DEPTH: u32 = 32;

const CSS: &str = include_str!("page.css");

/// Bytes of SVG a page embeds by default ([`HtmlOptions::graph_budget`]).
pub const DEFAULT_GRAPH_BUDGET: usize = 4 << 20;

/// What the page shows besides the session itself.
#[derive(Debug, Clone)]
pub struct HtmlOptions<'a> {
    /// The session's provenance journal (with its subagents' journals) when it has one: each
    /// tool result then carries its formation graph, traced as `keel trace result:<call id>`
    /// traces it.
    pub provenance: Option<&'a QueryScope<'a>>,
    /// Bytes of SVG the page embeds at most. A graph is some 45 KB and a browser parses a few
    /// MB a second, so a session of thousands of tool calls would make a page no browser opens
    /// quickly: once the budget is spent, later results name the `keel trace` command that
    /// draws their graph instead.
    pub graph_budget: usize,
    /// The plugins' presenters: a plugin's event shows as a note with what its presenter says,
    /// as in every other front end.
    pub presenters: keel_protocol::present::PresenterSet,
}

impl Default for HtmlOptions<'_> {
    fn default() -> Self {
        HtmlOptions {
            provenance: None,
            graph_budget: DEFAULT_GRAPH_BUDGET,
            presenters: Default::default(),
        }
    }
}

struct Page<'a> {
    out: String,
    session: &'a Session,
    options: &'a HtmlOptions<'a>,
    facts: Facts,
    /// Tool results by seq, to show each inside its call.
    results: HashMap<Seq, &'a Item>,
    /// The results some call shows (the first result of each call).
    in_calls: HashSet<Seq>,
    graphs: u64,
    /// Graphs left out once the budget was spent, and the SVG bytes embedded so far.
    omitted: u64,
    graph_bytes: usize,
}

/// The whole page of `session` (see the module docs).
pub fn render_html(session: &Session, options: &HtmlOptions<'_>) -> String {
    let transcript = Transcript::build(session, &options.presenters);
    let facts = Facts::of(session);
    let mut results = HashMap::new();
    let mut in_calls = HashSet::new();
    for item in items(&transcript) {
        match item {
            Item::ToolResult { seq, .. } => {
                results.insert(*seq, item);
            }
            Item::Assistant { calls, .. } => in_calls.extend(calls.iter().filter_map(|c| c.result)),
            _ => {}
        }
    }
    let mut page = Page {
        out: String::with_capacity(4096 + session.len() as usize * 64),
        session,
        options,
        facts,
        results,
        in_calls,
        graphs: 0,
        omitted: 0,
        graph_bytes: 0,
    };
    page.document(&transcript);
    page.out
}

/// Every item of a transcript, in log order.
fn items(t: &Transcript) -> impl Iterator<Item = &Item> {
    t.blocks
        .iter()
        .flat_map(|b| -> Box<dyn Iterator<Item = &Item>> {
            match b {
                Block::Item(i) => Box::new(std::iter::once(i)),
                Block::Turn(turn) => Box::new(turn.entries.iter().flat_map(
                    |e| -> Box<dyn Iterator<Item = &Item>> {
                        match e {
                            Entry::Item(i) => Box::new(std::iter::once(i)),
                            Entry::Step(s) => Box::new(s.items.iter()),
                        }
                    },
                )),
            }
        })
}

impl Page<'_> {
    fn document(&mut self, t: &Transcript) {
        self.out.push_str(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        );
        let _ = writeln!(
            self.out,
            "<meta name=\"generator\" content=\"keel {}\">",
            env!("CARGO_PKG_VERSION")
        );
        self.out.push_str("<title>keel session ");
        text(&mut self.out, &t.id);
        if let Some(title) = &t.title {
            self.out.push_str(" — ");
            text(&mut self.out, &one_line(title, 80));
        }
        self.out.push_str("</title>\n<style>\n");
        self.out.push_str(CSS);
        self.out.push_str("</style>\n</head>\n<body>\n");
        self.header(t);
        self.out.push_str("<main>\n");
        for block in &t.blocks {
            match block {
                Block::Item(item) => {
                    self.item(item);
                }
                Block::Turn(turn) => {
                    self.turn(turn);
                }
            }
        }
        self.out
            .push_str("</main>\n<footer>Exported by <code>keel sessions export ");
        text(&mut self.out, &t.id);
        let _ = write!(
            self.out,
            " --format html</code>: one file, no network, no script. {} formation graph(s) embedded",
            self.graphs
        );
        if self.omitted > 0 {
            let _ = write!(
                self.out,
                ", {} left out over the page's budget of {} KiB of graphs (<code>keel trace result:CALL_ID --format svg</code> draws one)",
                self.omitted,
                self.options.graph_budget >> 10
            );
        }
        self.out.push_str(".</footer>\n</body>\n</html>\n");
    }

    fn header(&mut self, t: &Transcript) {
        self.out
            .push_str("<header class=\"session\" id=\"session\" data-session=\"");
        text(&mut self.out, &t.id);
        self.out.push_str("\">\n<h1>");
        match &t.title {
            Some(title) => text(&mut self.out, &one_line(title, 200)),
            None => self.out.push_str("keel session"),
        }
        self.out.push_str("</h1>\n<dl>\n");
        let row = |out: &mut String, k: &str, v: &str| {
            let _ = write!(out, "<dt>{k}</dt><dd>");
            text(out, v);
            out.push_str("</dd>\n");
        };
        row(&mut self.out, "session", &t.id);
        row(
            &mut self.out,
            "directory",
            t.cwd.as_deref().unwrap_or("(none)"),
        );
        row(
            &mut self.out,
            "created",
            &keel_protocol::utc_time(t.created),
        );
        if let Some(p) = &t.parent {
            row(&mut self.out, "parent", p);
        }
        let turns = t
            .blocks
            .iter()
            .filter(|b| matches!(b, Block::Turn(_)))
            .count();
        row(
            &mut self.out,
            "events",
            &format!(
                "{} events, {turns} turns, {} steps, {} tool calls",
                thousands(t.events),
                thousands(self.facts.steps),
                thousands(self.facts.calls)
            ),
        );
        self.out.push_str("<dt>usage</dt><dd>");
        let total = self.facts.total;
        usage_span(&mut self.out, &total);
        self.out.push_str("</dd>\n");
        row(
            &mut self.out,
            "provenance",
            if self.options.provenance.is_some() {
                "journal found: each tool call shows the formation graph of its result"
            } else {
                "no journal (run with --provenance to record one)"
            },
        );
        self.out.push_str("</dl>\n</header>\n");
    }

    fn turn(&mut self, turn: &keel_session::view::transcript::Turn) {
        let reason = turn.end.as_ref().map_or("open", |e| e.reason.as_str());
        let _ = writeln!(
            self.out,
            "<section class=\"turn\" id=\"turn-{n}\" data-turn=\"{n}\" data-seq=\"{}\" data-end=\"{}\">\n<h2>Turn {n} <span class=\"seq\">#{}</span> <span class=\"end reason-{r}\">{r}</span></h2>",
            turn.seq,
            escaped(reason),
            turn.seq,
            n = turn.turn,
            r = escaped(reason),
        );
        for entry in &turn.entries {
            match entry {
                Entry::Item(item) => {
                    self.item(item);
                }
                Entry::Step(step) => {
                    self.step(step);
                }
            }
        }
        match &turn.end {
            Some(end) if end.reason == "interrupted" => {
                let _ = write!(
                    self.out,
                    "<div class=\"marker interrupted\" data-marker=\"interrupted\" data-seq=\"{}\">Turn {} was interrupted: keel stopped mid-turn, and the session was repaired when it was resumed (calls without a result were closed with an error result).",
                    end.seq, turn.turn
                );
                let _ = writeln!(self.out, " <span class=\"seq\">#{}</span></div>", end.seq);
            }
            Some(end) => {
                let _ = write!(
                    self.out,
                    "<div class=\"marker turn-end reason-{r}\" data-marker=\"turn-end\" data-seq=\"{}\">Turn {} ended: {r}",
                    end.seq,
                    turn.turn,
                    r = escaped(&end.reason)
                );
                if let Some(d) = &end.detail {
                    self.out.push_str(": ");
                    text(&mut self.out, &one_line(d, 300));
                }
                let _ = writeln!(self.out, " <span class=\"seq\">#{}</span></div>", end.seq);
            }
            None => self.out.push_str(
                "<div class=\"marker open\" data-marker=\"open\">The turn is still open (no turn/end in the log).</div>\n",
            ),
        }
        self.out.push_str("</section>\n");
    }

    fn step(&mut self, step: &keel_session::view::transcript::Step) {
        let _ = write!(
            self.out,
            "<div class=\"step\" id=\"step-{t}-{s}\" data-step=\"{t}.{s}\" data-seq=\"{}\">\n<div class=\"step-head\">Step {t}.{s} <span class=\"seq\">#{}</span> ",
            step.seq,
            step.seq,
            t = step.turn,
            s = step.step,
        );
        if let Some(u) = self.facts.usage.get(&(step.turn, step.step)).copied() {
            usage_span(&mut self.out, &u);
        }
        self.out.push_str("</div>\n");
        for item in &step.items {
            self.item(item);
        }
        if step.ended.is_none() {
            self.out
                .push_str("<div class=\"note\">(step not closed)</div>\n");
        }
        self.out.push_str("</div>\n");
    }

    /// The attributes and badges of what replaced an event or what it replaced.
    fn fate(&mut self, fate: &Fate) {
        if let Some(sh) = fate.shadowed_by {
            let _ = write!(
                self.out,
                "<span class=\"fate\" data-shadowed-by=\"{}\">{} → #{}</span>",
                sh.seq, sh.how, sh.seq
            );
        }
        if !fate.replaces.is_empty() {
            let seqs: Vec<String> = fate.replaces.iter().map(|q| format!("#{q}")).collect();
            let _ = write!(
                self.out,
                "<span class=\"fate\">replaces {}</span>",
                seqs.join(", ")
            );
        }
    }

    fn item(&mut self, item: &Item) {
        match item {
            Item::User {
                seq,
                origin,
                plugin,
                text: body,
                fate,
            } => {
                let shadow = if fate.shadowed_by.is_some() {
                    " shadowed"
                } else {
                    ""
                };
                match origin {
                    Origin::Human => {
                        let _ = write!(
                            self.out,
                            "<div class=\"msg user{shadow}\" data-seq=\"{seq}\"><div class=\"who\">User <span class=\"seq\">#{seq}</span>"
                        );
                        self.fate(fate);
                        self.out.push_str("</div><div class=\"text\">");
                        capped(&mut self.out, body.trim_end(), TEXT_CAP);
                        self.out.push_str("</div></div>\n");
                    }
                    Origin::Summary => {
                        let _ = write!(
                            self.out,
                            "<div class=\"msg summary marker{shadow}\" data-marker=\"compaction-summary\" data-seq=\"{seq}\"><div class=\"who\">Compaction summary <span class=\"seq\">#{seq}</span>"
                        );
                        self.fate(fate);
                        self.out.push_str("</div><div class=\"text\">");
                        capped(&mut self.out, body.trim_end(), TEXT_CAP);
                        self.out.push_str("</div></div>\n");
                    }
                    Origin::Plugin | Origin::Other => {
                        let _ = write!(
                            self.out,
                            "<details class=\"context{shadow}\" data-seq=\"{seq}\"><summary>context from "
                        );
                        text(&mut self.out, plugin.as_deref().unwrap_or("another source"));
                        let _ = write!(
                            self.out,
                            " <span class=\"seq\">#{seq}</span> ({} bytes)",
                            body.len()
                        );
                        self.fate(fate);
                        self.out.push_str("</summary><pre>");
                        capped(&mut self.out, body, TEXT_CAP);
                        self.out.push_str("</pre></details>\n");
                    }
                }
            }
            Item::Assistant {
                seq,
                reasoning,
                text: body,
                calls,
                interrupted,
                fate,
            } => {
                let shadow = if fate.shadowed_by.is_some() {
                    " shadowed"
                } else {
                    ""
                };
                if !reasoning.is_empty() {
                    let _ = write!(
                        self.out,
                        "<details class=\"reasoning{shadow}\" data-seq=\"{seq}\"><summary>Reasoning <span class=\"seq\">#{seq}</span> ({} chars)</summary><div class=\"text\">",
                        reasoning.chars().count()
                    );
                    capped(&mut self.out, reasoning, TEXT_CAP);
                    self.out.push_str("</div></details>\n");
                }
                if !body.is_empty() || (*interrupted && calls.is_empty()) {
                    let _ = write!(
                        self.out,
                        "<div class=\"msg assistant{shadow}\" data-seq=\"{seq}\"><div class=\"who\">Assistant <span class=\"seq\">#{seq}</span>"
                    );
                    if *interrupted {
                        self.out
                            .push_str("<span class=\"fate\">stream cut short</span>");
                    }
                    self.fate(fate);
                    self.out.push_str("</div><div class=\"text\">");
                    capped(&mut self.out, body.trim_end(), TEXT_CAP);
                    self.out.push_str("</div></div>\n");
                } else if fate.shadowed_by.is_some() && !calls.is_empty() {
                    let _ = write!(
                        self.out,
                        "<div class=\"note shadowed\" data-seq=\"{seq}\">tool calls of #{seq} "
                    );
                    self.fate(fate);
                    self.out.push_str("</div>\n");
                }
                for call in calls {
                    self.call(call);
                }
            }
            Item::ToolResult { seq, .. } => {
                // Shown inside its call unless no call of the log shows it (a replacement
                // left by pruning, a result without a logged call).
                if !self.in_calls.contains(seq) {
                    self.standalone_result(*seq, item);
                }
            }
            Item::Compaction { seq, phase, detail } => {
                let _ = write!(
                    self.out,
                    "<div class=\"marker compaction\" data-marker=\"compaction\" data-phase=\"{phase}\" data-seq=\"{seq}\">Compaction {phase}: "
                );
                text(&mut self.out, detail);
                let _ = writeln!(self.out, " <span class=\"seq\">#{seq}</span></div>");
            }
            Item::Note {
                seq,
                event,
                text: summary,
            } => self.note(*seq, event, summary),
        }
    }

    fn call(&mut self, call: &Call) {
        let result = call.result.and_then(|s| self.results.get(&s).copied());
        let (state, status) = match result {
            Some(Item::ToolResult {
                is_error: true,
                code,
                ..
            }) => (
                "error",
                format!("error {}", code.as_deref().unwrap_or(""))
                    .trim_end()
                    .to_owned(),
            ),
            Some(_) => ("ok", "ok".to_owned()),
            None if call.started.is_some() => ("pending", "no result".to_owned()),
            None => ("pending", "not started".to_owned()),
        };
        self.out.push_str("<details class=\"tool ");
        self.out.push_str(state);
        self.out.push_str("\" id=\"call-");
        text(&mut self.out, &call.id);
        self.out.push_str("\" data-call-id=\"");
        text(&mut self.out, &call.id);
        self.out.push_str("\" data-tool=\"");
        text(&mut self.out, &call.name);
        self.out.push('"');
        if let Some(r) = call.result {
            let _ = write!(self.out, " data-result-seq=\"{r}\"");
        }
        self.out.push_str("><summary><span class=\"tool-name\">");
        text(&mut self.out, &call.name);
        self.out.push_str("</span> <span class=\"args-brief\">");
        text(&mut self.out, &compact_args(&call.arguments, BRIEF_ARGS));
        let _ = write!(
            self.out,
            "</span> <span class=\"status {state}\">{}</span></summary>\n<div class=\"tool-body\">\n<div class=\"label\">Arguments <span class=\"seq\">call id ",
            escaped(&status)
        );
        text(&mut self.out, &call.id);
        if let Some(s) = call.started {
            let _ = write!(self.out, ", tool/call #{s}");
        }
        self.out.push_str("</span></div>\n<pre class=\"args\">");
        let pretty = serde_json::from_str::<serde_json::Value>(&call.arguments)
            .ok()
            .and_then(|v| {
                serde_json::to_string_pretty(&keel_session::view::text::sorted_keys(v)).ok()
            });
        capped(
            &mut self.out,
            pretty.as_deref().unwrap_or(&call.arguments),
            TEXT_CAP,
        );
        self.out.push_str("</pre>\n");
        if let Some(Item::ToolResult {
            seq,
            text: body,
            fate,
            ..
        }) = result
        {
            let _ = write!(
                self.out,
                "<div class=\"label\">Result <span class=\"seq\">#{seq}</span>"
            );
            self.fate(fate);
            self.out.push_str("</div>\n<pre class=\"result\">");
            capped(&mut self.out, body, TEXT_CAP);
            self.out.push_str("</pre>\n");
            self.graph(&call.id);
        }
        self.out.push_str("</div>\n</details>\n");
    }

    /// The formation graph of the result of `call_id` (`keel trace result:<call id>`), when a
    /// journal was given. A result the pipeline did not settle (one written by crash repair for
    /// a call keel was killed in) has no node in the journal: the note says so.
    fn graph(&mut self, call_id: &str) {
        let Some(scope) = self.options.provenance else {
            return;
        };
        let target = format!("result:{call_id}");
        match trace_in(scope, &target, Direction::Backward, GRAPH_DEPTH) {
            Ok(_) if self.graph_bytes >= self.options.graph_budget => {
                self.omitted += 1;
                self.out
                    .push_str("<div class=\"note graph-omitted\" data-target=\"");
                text(&mut self.out, &target);
                self.out.push_str("\">formation graph not embedded (the page's budget of graphs is spent): <code>keel trace ");
                text(&mut self.out, &target);
                self.out.push_str(" --session ");
                text(&mut self.out, &self.session.header().id.to_string());
                self.out.push_str(" --format svg</code></div>\n");
            }
            Ok(answer) => {
                self.graphs += 1;
                self.out
                    .push_str("<details class=\"provenance\" data-target=\"");
                text(&mut self.out, &target);
                let _ = write!(
                    self.out,
                    "\"><summary>Formation graph: {} nodes, {} edges{}{} <span class=\"seq\">keel trace ",
                    answer.nodes.len(),
                    answer.edges.len(),
                    if answer.complete { "" } else { ", incomplete" },
                    if answer.truncated { ", truncated" } else { "" },
                );
                text(&mut self.out, &target);
                self.out
                    .push_str("</span></summary>\n<div class=\"graph\">\n");
                let svg = trace_svg(&answer);
                self.graph_bytes += svg.len();
                self.out.push_str(&svg);
                self.out.push_str("</div>\n</details>\n");
            }
            Err(e) => {
                self.out
                    .push_str("<div class=\"note provenance-missing\" data-target=\"");
                text(&mut self.out, &target);
                self.out.push_str("\">no formation graph: ");
                text(&mut self.out, &e.to_string());
                if matches!(e, QueryError::UnknownTarget { .. }) {
                    self.out.push_str(
                        " (the journal holds no settled result for this call: a result written by crash repair, or a call made before provenance was on)",
                    );
                }
                self.out.push_str("</div>\n");
            }
        }
    }

    fn standalone_result(&mut self, seq: Seq, item: &Item) {
        let Item::ToolResult {
            call_id,
            tool,
            is_error,
            code,
            text: body,
            fate,
            ..
        } = item
        else {
            return;
        };
        let state = if *is_error { "error" } else { "ok" };
        let _ = write!(
            self.out,
            "<details class=\"tool result-only {state}\" data-seq=\"{seq}\" data-result-of=\""
        );
        text(&mut self.out, call_id);
        self.out.push_str("\"><summary><span class=\"tool-name\">");
        text(&mut self.out, tool.as_deref().unwrap_or("result"));
        self.out.push_str("</span> result of ");
        text(&mut self.out, call_id);
        let _ = write!(
            self.out,
            " <span class=\"seq\">#{seq}</span> <span class=\"status {state}\">"
        );
        match (is_error, code) {
            (true, Some(c)) => {
                self.out.push_str("error ");
                text(&mut self.out, c);
            }
            (true, None) => self.out.push_str("error"),
            (false, _) => self.out.push_str("ok"),
        }
        self.out.push_str("</span>");
        self.fate(fate);
        self.out.push_str("</summary>\n<pre class=\"result\">");
        capped(&mut self.out, body, TEXT_CAP);
        self.out.push_str("</pre>\n</details>\n");
    }

    fn note(&mut self, seq: Seq, event: &str, summary: &str) {
        let ev = self.session.whole_event(seq).map(|e| &e.body);
        match ev {
            Some(EventBody::TodoWrite(todo)) => self.todo(seq, todo),
            Some(EventBody::PlanMode(plan)) => self.plan(seq, plan),
            _ => {
                self.out.push_str("<div class=\"note\" data-event=\"");
                text(&mut self.out, event);
                let _ = write!(self.out, "\" data-seq=\"{seq}\"><b>");
                text(&mut self.out, event);
                self.out.push_str("</b> ");
                text(&mut self.out, summary);
                let _ = writeln!(self.out, " <span class=\"seq\">#{seq}</span></div>");
            }
        }
    }

    fn todo(&mut self, seq: Seq, todo: &TodoWrite) {
        let done = todo
            .todos
            .iter()
            .filter(|t| t.status == TodoStatus::Completed)
            .count();
        let _ = write!(
            self.out,
            "<div class=\"todo\" data-marker=\"todo\" data-seq=\"{seq}\"><div class=\"label\">Todo list: {done} of {} done <span class=\"seq\">#{seq}</span></div><ul>",
            todo.todos.len()
        );
        for t in &todo.todos {
            let (class, mark) = match t.status {
                TodoStatus::Completed => ("completed", "☑"),
                TodoStatus::InProgress => ("in-progress", "▶"),
                TodoStatus::Pending => ("pending", "☐"),
            };
            let _ = write!(
                self.out,
                "<li class=\"{class}\" data-status=\"{class}\"><span class=\"mark\">{mark}</span> "
            );
            let shown = match (t.status, &t.active_form) {
                (TodoStatus::InProgress, Some(a)) => a,
                _ => &t.content,
            };
            text(&mut self.out, shown);
            self.out.push_str("</li>");
        }
        self.out.push_str("</ul></div>\n");
    }

    fn plan(&mut self, seq: Seq, plan: &PlanModeEvent) {
        let state = match (plan.active, plan.approved) {
            (true, None) if plan.plan.is_some() => {
                "plan handed in: it awaits the user's approval (plan mode stays on)"
            }
            (true, _) => "plan mode on: the agent may only read and plan",
            (false, Some(true)) => "plan approved: plan mode off",
            (false, Some(false)) => "plan not approved",
            (false, None) => "plan mode off",
        };
        let _ = write!(
            self.out,
            "<div class=\"marker plan\" data-marker=\"plan\" data-active=\"{}\" data-seq=\"{seq}\">{state} <span class=\"seq\">#{seq}</span>",
            plan.active
        );
        if let Some(p) = &plan.plan {
            self.out
                .push_str("<details open><summary>The plan</summary><div class=\"text\">");
            capped(&mut self.out, p, TEXT_CAP);
            self.out.push_str("</div></details>");
        }
        self.out.push_str("</div>\n");
    }
}
