//! Property test: the surface fold and incremental derive agree with a simple reference model
//! under random sequences of appends, replacements, deltas, refused replacements and derives.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::header;
use keel_protocol::*;
use keel_session::Session;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Append,
    AppendEmptyAssistant,
    Delta,
    /// Replace positions (a, b) of the reference surface, scaled to its length.
    Replace(u16, u16),
    /// A replacement that fails to cite one shadowed seq (must be refused, changing nothing).
    BadReplace(u16),
    /// A `surface/rewind` to the point before one of the earlier events, scaled to their number.
    Rewind(u16),
    Derive,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Append),
        1 => Just(Op::AppendEmptyAssistant),
        2 => Just(Op::Delta),
        2 => (any::<u16>(), any::<u16>()).prop_map(|(a, b)| Op::Replace(a, b)),
        1 => any::<u16>().prop_map(Op::BadReplace),
        1 => any::<u16>().prop_map(Op::Rewind),
        2 => Just(Op::Derive),
    ]
}

fn user(text: String) -> EventBody {
    EventBody::UserMessage(Box::new(Message::user_text(
        text,
        MessageSource::user(),
        "id",
    )))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn fold_matches_reference(ops in proptest::collection::vec(op(), 0..60)) {
        let mut s = Session::new(header("p"));
        // Reference: (seq, text or None for an empty assistant message).
        let mut model: Vec<(Seq, Option<String>)> = vec![];
        let mut generation = 0u64;
        // The reference surface just before each event: `before[i]` is the model before seq i.
        let mut before: Vec<Vec<(Seq, Option<String>)>> = vec![];
        for op in ops {
            // Each op appends at most one event, at seq `s.len()`.
            if before.len() as u64 == s.len() {
                before.push(model.clone());
            }
            match op {
                Op::Append => {
                    let seq = s.next_seq();
                    let text = format!("m{}", seq.0);
                    s.push_surface(user(text.clone()), SurfaceOp::Append, vec![]).unwrap();
                    model.push((seq, Some(text)));
                }
                Op::AppendEmptyAssistant => {
                    let message = Message { role: Role::Assistant, content: vec![], source: MessageSource::model("p", "m"), id: "a".into() };
                    let body = EventBody::AssistantMessage(Box::new(AssistantMessageEvent { turn: keel_protocol::TurnNo(1), step: keel_protocol::StepNo(1), message, usage: None, finish: None, interrupted: false }));
                    let seq = s.push_surface(body, SurfaceOp::Append, vec![]).unwrap();
                    model.push((seq, None));
                }
                Op::Delta => {
                    let chunk = StreamChunk::ReasoningDelta { index: 0, text: "r".into() };
                    s.push(EventBody::AssistantChunk(Box::new(AssistantChunk { turn: keel_protocol::TurnNo(1), step: keel_protocol::StepNo(1), chunk }))).unwrap();
                }
                Op::Replace(a, b) if !model.is_empty() => {
                    let (mut i, mut j) = (a as usize % model.len(), b as usize % model.len());
                    if i > j { std::mem::swap(&mut i, &mut j); }
                    let shadowed: Vec<Seq> = model[i..=j].iter().map(|m| m.0).collect();
                    let seq = s.next_seq();
                    let text = format!("r{}", seq.0);
                    let op = SurfaceOp::Replace { start: model[i].0, end: model[j].0 };
                    s.push_surface(user(text.clone()), op, shadowed).unwrap();
                    model.splice(i..=j, [(seq, Some(text))]);
                    generation += 1;
                }
                Op::BadReplace(a) if model.len() >= 2 => {
                    let i = a as usize % (model.len() - 1);
                    let op = SurfaceOp::Replace { start: model[i].0, end: model[i + 1].0 };
                    let len = s.len();
                    prop_assert!(s.push_surface(user("bad".into()), op, vec![model[i].0]).is_err());
                    prop_assert_eq!(s.len(), len);
                }
                Op::Rewind(a) if !s.is_empty() => {
                    let to = a as u64 % s.len();
                    let body = EventBody::SurfaceRewind(Box::new(SurfaceRewind { to_seq: Seq(to), turn: None, reason: None }));
                    s.push(body).unwrap();
                    model = before[to as usize].clone();
                    generation += 1;
                }
                Op::Replace(..) | Op::BadReplace(_) | Op::Rewind(_) => {}
                Op::Derive => {
                    let want: Vec<(Seq, String)> = model.iter().filter_map(|(s, t)| Some((*s, t.clone()?))).collect();
                    let got: Vec<(Seq, String)> = s.derive_messages().iter().map(|d| (d.seq, d.message.text())).collect();
                    prop_assert_eq!(got, want);
                }
            }
            let nodes: Vec<Seq> = model.iter().map(|m| m.0).collect();
            prop_assert_eq!(s.surface().nodes(), &nodes[..]);
            prop_assert_eq!(s.surface().generation(), generation);
        }
        let want: Vec<(Seq, String)> = model.iter().filter_map(|(s, t)| Some((*s, t.clone()?))).collect();
        let got: Vec<(Seq, String)> = s.derive_messages().iter().map(|d| (d.seq, d.message.text())).collect();
        prop_assert_eq!(got, want);
    }
}
