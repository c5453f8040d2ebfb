//! The TypeScript stripper: plain JavaScript passes through byte for byte, TypeScript's types
//! are blanked (lines and lengths kept), and arbitrary input never panics.

use keel_codemode::strip::strip_types;
use pretty_assertions::assert_eq;
use proptest::prelude::*;

/// Collapse runs of white space, so an expectation can be written without the blanks.
fn squash(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn stripped(ts: &str) -> String {
    match strip_types(ts) {
        Ok(s) => {
            assert_eq!(s.len(), ts.len(), "length kept for {ts:?}");
            assert_eq!(
                s.match_indices('\n').map(|(i, _)| i).collect::<Vec<_>>(),
                ts.match_indices('\n').map(|(i, _)| i).collect::<Vec<_>>(),
                "line breaks kept for {ts:?}"
            );
            s
        }
        Err(e) => panic!("{ts:?} did not strip: {e}"),
    }
}

/// Programs without any TypeScript, several of them close to TypeScript's syntax.
const PLAIN: &[&str] = &[
    "const a = b ? c : d;",
    "const o = { a: 1, b: x ? y : z, 'c': [1, 2], [k]: v, m() { return 1; }, get g() { return 2; } };",
    "label: for (const x of xs) { if (x) continue label; }",
    "switch (x) { case 1: y(); break; default: z(); }",
    "const r = /a[/]b\\/c/gi.test(s) ? 1 / 2 : 3 / 4;",
    "const t = `a ${b ? `n ${c}` : d} e ${ {k: 1}.k }`;",
    "if (a < b && c > d) { f(a < b, c > d); }",
    "const f = (a, b = c ? d : e) => ({ a: a, b });",
    "const g = async (x) => { await x; };",
    "class A extends B { static x = 1; #p = 2; constructor(a) { super(a); } get v() { return this.#p; } static m() {} *gen() {} }",
    "const s = 'it\\'s: a' + \"q: ?\" + x!==y;",
    "const n = !x; const m = a != b; const z = a !== b ? !c : !d;",
    "x = a\n[1, 2].forEach(f)",
    "return tools.read({ file_path: 'a' }).then((t) => t.split('\\n'));",
    "const as = 1; const type = 2; const interface_ = as + type;",
    "// a comment: with colons\n/* and a: block */ const q = 1 /* x: y */ ;",
    "const c = a?.b?.[0] ?? d; const e = a?.5:1;",
    "for (let i = 0, j = 10; i < j; i++) { s += i; }",
    "do { x--; } while (x > 0)",
    "const big = 0x1Fn + 1e-3 + .5 + 1_000;",
    "try { f(); } catch (e) { g(e); } finally { h(); }",
    "function f(a, {b, c: [d]}, ...rest) { return a; }",
    "const fn = function* () { yield 1; };",
    "obj = { async *gen() {}, 'quoted'(a) { return a; }, 1(b) {} };",
    "const re = x.replace(/:/g, '').split(/,\\s*/);",
    "if (a) b(); else c()\n{ d(); }",
];

#[test]
fn plain_javascript_passes_through_unchanged() {
    for js in PLAIN {
        assert_eq!(strip_types(js).as_deref(), Ok(*js), "changed: {js}");
    }
}

/// TypeScript statements and the JavaScript they strip to (blanks aside).
const CASES: &[(&str, &str)] = &[
    ("const xs: string[] = [];", "const xs = [];"),
    (
        "let a: number, b: Map<string, number[]> = new Map<string, number[]>();",
        "let a , b = new Map ();",
    ),
    (
        "function f(a: number, b?: {x: string}): Promise<void> {}",
        "function f(a , b ) {}",
    ),
    ("const y = x as unknown as string;", "const y = x ;"),
    (
        "const c = {a: 1} satisfies Record<string, number>;",
        "const c = {a: 1} ;",
    ),
    (
        "const v = m.get(k)!.push(x!); w = arr[0]!;",
        "const v = m.get(k) .push(x ); w = arr[0] ;",
    ),
    (
        "interface P { a: string; b?: number }\nconst p = 1;",
        "const p = 1;",
    ),
    ("type U = 'a' | 'b';\nconst u = 'a';", "const u = 'a';"),
    ("type G<T> = { v: T } & Other;\nlet g = 1;", "let g = 1;"),
    (
        "const f = (a: number, b: string = 'x'): string => b + a;",
        "const f = (a , b = 'x') => b + a;",
    ),
    (
        "const h = async <T,>(x) => x; xs.map((x: number): number => x * 2);",
        "const h = async <T,>(x) => x; xs.map((x ) => x * 2);",
    ),
    (
        "function id<T extends object = {}>(x: T): T { return x; }",
        "function id (x ) { return x; }",
    ),
    (
        "const r = tools.read<string>({ file_path: 'a' });",
        "const r = tools.read ({ file_path: 'a' });",
    ),
    (
        "class A<T> extends B<T> implements I, J {\n  private x: number = 1;\n  readonly y?: string;\n  z!: T;\n  static s: number;\n  [key: string]: any;\n  public m(a: T): void { this.x = 2; }\n}",
        "class A extends B {\n x = 1;\n y ;\n z ;\n static s ;\n\n m(a ) { this.x = 2; }\n}",
    ),
    ("let d!: number;", "let d ;"),
    (
        "const { a, b }: { a: number; b: string } = o;",
        "const { a, b } = o;",
    ),
    (
        "try { f(); } catch (e: unknown) { g(e); }",
        "try { f(); } catch (e ) { g(e); }",
    ),
    ("declare const ext: number;\nconst k = 1;", "const k = 1;"),
    (
        "const o = { m(a: number): number { return a; }, n: (b?: string) => b };",
        "const o = { m(a ) { return a; }, n: (b ) => b };",
    ),
    (
        "function guard(x: unknown): x is string { return typeof x === 'string'; }",
        "function guard(x ) { return typeof x === 'string'; }",
    ),
    (
        "const fnt: (a: number) => void = (a) => {};",
        "const fnt = (a) => {};",
    ),
    (
        "abstract class Q { protected abstract override w: number; }",
        "class Q { w ; }",
    ),
    ("const t = `${(x as any).y}`;", "const t = `${(x ).y}`;"),
    ("const k = o[key as keyof typeof o];", "const k = o[key ];"),
];

#[test]
fn type_syntax_is_blanked() {
    for (ts, js) in CASES {
        assert_eq!(squash(&stripped(ts)), squash(js), "for {ts}");
    }
}

#[test]
fn lines_of_the_rest_stay_where_they_were() {
    let ts = "interface A {\n  x: number;\n}\nconst a: A = { x: 1 };\nthrow new Error('here');";
    let js = stripped(ts);
    assert_eq!(js.lines().nth(4), Some("throw new Error('here');"));
    assert_eq!(js.lines().count(), ts.lines().count());
}

#[test]
fn syntax_that_needs_compiling_is_refused_with_its_line() {
    let e = strip_types("const a = 1;\nenum Color { Red, Green }").err();
    assert_eq!(e.as_ref().map(|e| e.line), Some(2));
    assert!(e.is_some_and(|e| e.message.contains("enum")));
    let e = strip_types("class A {\n  constructor(private x: number) {}\n}").err();
    assert_eq!(e.as_ref().map(|e| e.line), Some(2));
    assert!(e.is_some_and(|e| e.message.contains("parameter properties")));
    let e = strip_types("namespace N { }").err();
    assert!(e.is_some_and(|e| e.message.contains("namespace")));
}

/// Fragments random programs are built from: JavaScript, TypeScript and broken pieces.
const FRAGMENTS: &[&str] = &[
    "const ",
    "let ",
    "x",
    ": ",
    "number",
    "string[]",
    " = ",
    "1",
    ";",
    "\n",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    "?",
    "!",
    ",",
    " as ",
    "any",
    "`",
    "${",
    "'",
    "\"",
    "/",
    "/*",
    "*/",
    "//",
    "=>",
    "function ",
    "class ",
    "interface ",
    "type ",
    "async ",
    ".",
    "é",
    "\\",
    "satisfies ",
    "private ",
    "|",
    "&",
    "?.",
    "enum ",
    "return ",
    "0x1f",
    "#p",
    " ",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Whatever the input: no panic; on success the length and every line break are kept, and
    /// only blanks are added.
    #[test]
    fn any_input_keeps_its_shape(parts in proptest::collection::vec(0..FRAGMENTS.len(), 0..60)) {
        let src: String = parts.iter().map(|i| FRAGMENTS[*i]).collect();
        if let Ok(out) = strip_types(&src) {
            prop_assert_eq!(out.len(), src.len());
            for (a, b) in src.bytes().zip(out.bytes()) {
                prop_assert!(a == b || b == b' ', "only blanks added");
                prop_assert!((a == b'\n') == (b == b'\n'));
            }
        }
    }

    /// A program of whole statements (plain and TypeScript) strips to what its statements
    /// strip to one by one, and stripping the result again changes nothing.
    #[test]
    fn statements_strip_alone_as_together(picks in proptest::collection::vec(0..(CASES.len() + PLAIN.len()), 1..12)) {
        let statement = |i: usize| if i < CASES.len() { CASES[i].0 } else { PLAIN[i - CASES.len()] };
        let whole: Vec<&str> = picks.iter().map(|i| statement(*i)).filter(|s| s.ends_with(';') || s.ends_with('}')).collect();
        let program = whole.join("\n");
        let one_by_one: Vec<String> = whole.iter().map(|s| strip_types(s).unwrap()).collect();
        let out = strip_types(&program).unwrap();
        prop_assert_eq!(&out, &one_by_one.join("\n"));
        prop_assert_eq!(strip_types(&out), Ok(out.clone()));
    }

    /// Arbitrary text (any characters) never makes the stripper panic.
    #[test]
    fn arbitrary_text_never_panics(src in "\\PC{0,200}") {
        let _ = strip_types(&src);
    }
}
