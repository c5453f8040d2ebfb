//! The Markdown renderer of the conversation view, through its public `render`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use keel_tui::markdown::render;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// The lines as plain text.
fn plain(lines: &[Line<'_>]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

fn render_plain(text: &str, width: u16) -> Vec<String> {
    plain(&render(text, width))
}

/// The tags of a style: `b` bold, `i` italic, `u` underlined, `s` crossed out, `dim`, and the
/// foreground colour.
fn tags(style: Style) -> Vec<String> {
    let mut tags = Vec::new();
    for (modifier, tag) in [
        (Modifier::BOLD, "b"),
        (Modifier::ITALIC, "i"),
        (Modifier::UNDERLINED, "u"),
        (Modifier::CROSSED_OUT, "s"),
        (Modifier::DIM, "dim"),
    ] {
        if style.add_modifier.contains(modifier) {
            tags.push(tag.to_owned());
        }
    }
    if let Some(fg) = style.fg {
        tags.push(format!("{fg:?}").to_lowercase());
    }
    if let Some(bg) = style.bg {
        tags.push(format!("bg:{bg:?}").to_lowercase());
    }
    tags
}

/// The lines with styled spans written `[b,u]text[/]`, one line each, ending with `|` so
/// trailing spaces show.
fn markup(lines: &[Line<'_>]) -> String {
    let mut out = String::new();
    for line in lines {
        for span in &line.spans {
            let tags = tags(span.style);
            if tags.is_empty() {
                out.push_str(&span.content);
            } else {
                out.push_str(&format!("[{}]{}[/]", tags.join(","), span.content));
            }
        }
        out.push_str("|\n");
    }
    out
}

/// The style of the first span whose text contains `needle`.
fn style_of(lines: &[Line<'_>], needle: &str) -> Style {
    lines
        .iter()
        .flat_map(|l| l.spans.iter())
        .find(|s| s.content.contains(needle))
        .map(|s: &Span<'_>| s.style)
        .unwrap_or_else(|| panic!("no span contains {needle:?}"))
}

fn assert_fits(lines: &[Line<'_>], width: u16, what: &str) {
    for line in lines {
        assert!(
            line.width() <= usize::from(width),
            "{what}: line wider than {width}: {:?} ({})",
            plain(std::slice::from_ref(line))[0],
            line.width()
        );
    }
}

const RICH: &str = r#"# Release notes

Keel **0.2** adds *streaming* output, ~~the old API~~ is gone, and `keel run` takes a flag.
See [the docs](https://example.com/docs) or <https://example.com>.

## Changes

- Faster start-up: tools load lazily, which matters when many MCP servers are configured
- Nested:
  - child one
  - child two
    1. deep
- [x] done task
- [ ] open task

3. third
4. fourth

> A quote that is long enough to wrap across more than one line when narrow.
>
> > nested

```rust
// entry point
fn main() {
    let answer: u32 = 42;
    println!("hello {answer}"); // greet
}
```

| Name | Kind | Notes |
|:-----|:----:|------:|
| `read` | tool | reads a file |
| bash | tool | runs a command in a sandbox |

---

<b>html</b> passes through
"#;

/// A mixed document with wide characters, long words and lines, deep nesting and a wide table.
const MIXED: &str = r#"# A heading that is rather long and will need wrapping at narrow widths

Plain text with **bold**, *italic*, `code`, ~~gone~~ and a [link](https://example.com/a/very/long/path/that/does/not/fit/anywhere/at/all).
Supercalifragilisticexpialidocious-and-then-some-more-characters-without-any-space-at-all.
日本語のテキストは幅が二倍です。日本語のテキストは幅が二倍です。 Emoji 🎉🎉🎉 ❤️ too.

1. one
   - two
     - three
       - four
         > quoted deep inside a list with text that wraps and wraps and wraps
         > ```python
         > def f(x):  # comment
         >     return "a string that is very long and will certainly be cut at the edge" + 1
         > ```

```
no language here, just a long line that goes on and on past any reasonable terminal width
	tab	separated	values
```

    indented code block with a very long line that should be cut rather than wrapped ok

| a | b | c | d | e | f |
|---|---|---|---|---|---|
| some long cell content | 日本語日本語日本語 | x | yyyyyyyyyyyyyyyyyyyyyyy | z | the last column is long too |

- [ ] a task item whose text is long enough that it must wrap onto a continuation line

***

<div>
  <p>html block</p>
</div>
"#;

#[test]
fn empty_input_renders_nothing() {
    assert!(render("", 80).is_empty());
    assert!(render("\n\n   \n", 80).is_empty());
}

#[test]
fn paragraph_wraps_at_spaces_and_joins_soft_breaks() {
    let lines = render_plain("the quick brown fox\njumps over the lazy dog", 10);
    assert_eq!(
        lines,
        ["the quick", "brown fox", "jumps over", "the lazy", "dog"]
    );
}

#[test]
fn hard_break_starts_a_new_line() {
    assert_eq!(
        render_plain("one  \ntwo\\\nthree", 80),
        ["one", "two", "three"]
    );
}

#[test]
fn word_longer_than_width_is_broken() {
    assert_eq!(
        render_plain("go abcdefghijklmnop end", 6),
        ["go", "abcdef", "ghijkl", "mnop", "end"]
    );
}

#[test]
fn blocks_are_separated_by_one_blank_line() {
    let lines = render_plain("# Title\nfirst\n\nsecond\n\n---\n\nthird", 20);
    assert_eq!(
        lines,
        [
            "Title",
            "",
            "first",
            "",
            "second",
            "",
            "────────────────────",
            "",
            "third"
        ]
    );
}

#[test]
fn headings_are_bold_without_markers() {
    let lines = render("# One\n\n## Two\n\n###### Six", 40);
    assert_eq!(plain(&lines), ["One", "", "Two", "", "Six"]);
    let h1 = style_of(&lines, "One");
    assert!(
        h1.add_modifier
            .contains(Modifier::BOLD | Modifier::UNDERLINED)
    );
    let h2 = style_of(&lines, "Two");
    assert!(h2.add_modifier.contains(Modifier::BOLD));
    assert!(!h2.add_modifier.contains(Modifier::UNDERLINED));
    assert!(
        style_of(&lines, "Six")
            .add_modifier
            .contains(Modifier::BOLD)
    );
}

#[test]
fn inline_styles() {
    let lines = render("*it* **bo** ~~st~~ `co` ***both***", 80);
    assert_eq!(plain(&lines), ["it bo st co both"]);
    assert!(
        style_of(&lines, "it")
            .add_modifier
            .contains(Modifier::ITALIC)
    );
    assert!(style_of(&lines, "bo").add_modifier.contains(Modifier::BOLD));
    assert!(
        style_of(&lines, "st")
            .add_modifier
            .contains(Modifier::CROSSED_OUT)
    );
    assert_eq!(style_of(&lines, "co").fg, Some(Color::Yellow));
    let both = style_of(&lines, "both").add_modifier;
    assert!(both.contains(Modifier::BOLD | Modifier::ITALIC));
}

#[test]
fn link_shows_its_url_dimmed_when_it_differs() {
    let lines = render("see [docs](https://x.dev/d) and <https://x.dev>", 80);
    assert_eq!(
        plain(&lines),
        ["see docs (https://x.dev/d) and https://x.dev"]
    );
    assert!(
        style_of(&lines, "(https://x.dev/d)")
            .add_modifier
            .contains(Modifier::DIM)
    );
    assert!(
        style_of(&lines, "docs")
            .add_modifier
            .contains(Modifier::UNDERLINED)
    );
    // An email autolink is not repeated either; a bare anchor is not shown.
    assert_eq!(render_plain("<me@x.dev> [up](#top)", 80), ["me@x.dev up"]);
}

#[test]
fn image_shows_alt_text_and_url() {
    assert_eq!(
        render_plain("![a cat](cat.png)", 80),
        ["[image: a cat] (cat.png)"]
    );
}

#[test]
fn bullet_lists_nest_by_two() {
    let lines = render_plain("- a\n- b\n  - c\n    - d\n- e", 40);
    assert_eq!(lines, ["• a", "• b", "  • c", "    • d", "• e"]);
}

#[test]
fn ordered_lists_keep_their_numbers() {
    let lines = render_plain("7. seven\n8. eight\n9. nine\n10. ten\n    - inner", 40);
    assert_eq!(
        lines,
        ["7. seven", "8. eight", "9. nine", "10. ten", "    • inner"]
    );
}

#[test]
fn task_items_show_their_box() {
    let lines = render("- [x] done\n- [ ] todo", 40);
    assert_eq!(plain(&lines), ["• [x] done", "• [ ] todo"]);
}

#[test]
fn wrapped_item_continues_under_its_text() {
    let lines = render_plain(
        "- alpha beta gamma delta\n1. alpha beta gamma delta\n\n- [ ] alpha beta gamma",
        14,
    );
    assert_eq!(
        lines,
        [
            "• alpha beta",
            "  gamma delta",
            "",
            "1. alpha beta",
            "   gamma delta",
            "",
            "• [ ] alpha",
            "      beta",
            "      gamma",
        ]
    );
}

#[test]
fn loose_list_items_are_separated() {
    let lines = render_plain("- a\n\n- b\n\n  more b\n- c", 40);
    assert_eq!(lines, ["• a", "", "• b", "", "  more b", "", "• c"]);
}

#[test]
fn block_quotes_are_prefixed_by_a_dim_bar() {
    let lines = render("> one two three\n>\n> > inner", 10);
    assert_eq!(plain(&lines), ["│ one two", "│ three", "│", "│ │ inner"]);
    assert!(style_of(&lines, "│").add_modifier.contains(Modifier::DIM));
}

#[test]
fn code_block_is_indented_labelled_and_not_wrapped() {
    let lines = render(
        "```rust\nlet x = 1;\nlet long_name = \"abcdefghij\";\n```",
        20,
    );
    assert_eq!(
        plain(&lines),
        ["  rust", "  let x = 1;", "  let long_name = \"…"]
    );
    assert!(
        style_of(&lines, "rust")
            .add_modifier
            .contains(Modifier::DIM)
    );
    assert!(lines.iter().all(|l| l.width() <= 20));
}

#[test]
fn code_highlighting_colours_tokens() {
    let lines = render(
        "```rust\nfn f() -> u8 { 42 } // answer\nlet s = \"hi\";\n```",
        80,
    );
    assert_eq!(style_of(&lines, "fn").fg, Some(Color::Magenta));
    assert_eq!(style_of(&lines, "42").fg, Some(Color::Cyan));
    assert_eq!(style_of(&lines, "// answer").fg, Some(Color::DarkGray));
    assert_eq!(style_of(&lines, "\"hi\"").fg, Some(Color::Green));
    // `f` and `u8` are not keywords.
    assert_eq!(style_of(&lines, "f()").fg, None);

    let py = render(
        "```python\ndef g(x):  # note\n    return 'a' if x else None\n```",
        80,
    );
    assert_eq!(style_of(&py, "def").fg, Some(Color::Magenta));
    assert_eq!(style_of(&py, "# note").fg, Some(Color::DarkGray));
    assert_eq!(style_of(&py, "'a'").fg, Some(Color::Green));
    assert_eq!(style_of(&py, "None").fg, Some(Color::Magenta));

    let sh = render("```sh\nif [ -n \"$x\" ]; then echo $# ; fi # done\n```", 80);
    assert_eq!(style_of(&sh, "then").fg, Some(Color::Magenta));
    assert_eq!(style_of(&sh, "# done").fg, Some(Color::DarkGray));

    let sql = render("```sql\nSELECT 1 -- one\n```", 80);
    assert_eq!(style_of(&sql, "SELECT").fg, Some(Color::Magenta));
    assert_eq!(style_of(&sql, "-- one").fg, Some(Color::DarkGray));

    // A URL is not a comment, and a lifetime is not a string.
    let rs = render("```rust\nlet u = \"x\"; f::<'a>(http://a)\n```", 80);
    assert!(plain(&rs)[1].contains("'a>"));
    assert_eq!(style_of(&rs, "'a>").fg, None);
}

#[test]
fn unlabelled_and_plain_code_blocks() {
    let lines = render("```\nx = 1\n```\n\n```text\nif 1\n```", 40);
    assert_eq!(plain(&lines), ["  x = 1", "", "  text", "  if 1"]);
    // Plain text is not highlighted.
    assert_eq!(style_of(&lines, "if 1").fg, None);
}

#[test]
fn indented_code_block() {
    let lines = render_plain("para\n\n    let x = 1;\n    \tend", 40);
    assert_eq!(lines, ["para", "", "  let x = 1;", "      end"]);
}

#[test]
fn unclosed_fence_renders_as_code() {
    let lines = render("Here:\n\n```rust\nfn main() {\n    let", 40);
    assert_eq!(
        plain(&lines),
        ["Here:", "", "  rust", "  fn main() {", "      let"]
    );
    assert_eq!(style_of(&lines, "let").fg, Some(Color::Magenta));
    // Just the opening fence.
    assert_eq!(render_plain("```py", 40), ["  py"]);
}

#[test]
fn constructs_cut_by_the_stream_still_show() {
    assert_eq!(render_plain("- ", 40), ["•"]);
    assert_eq!(render_plain("1. a\n2.", 40), ["1. a", "2."]);
    assert_eq!(render_plain(">", 40), ["│"]);
    assert_eq!(render_plain("**bol", 40), ["**bol"]);
    assert_eq!(
        render_plain("| a | b |\n|---|---|\n| 1", 40),
        ["a │ b", "──┼──", "1 │"]
    );
}

#[test]
fn table_has_header_separator_and_columns() {
    let lines = render(
        "| Name | N |\n|------|--:|\n| `a` | 1 |\n| long name | 22 |",
        40,
    );
    assert_eq!(
        plain(&lines),
        [
            "Name      │  N",
            "──────────┼───",
            "a         │  1",
            "long name │ 22",
        ]
    );
    assert!(
        style_of(&lines, "Name")
            .add_modifier
            .contains(Modifier::BOLD)
    );
    // The cell keeps its inline style; the padding has none.
    let cell = &lines[2].spans;
    assert_eq!(
        (cell[0].content.as_ref(), cell[0].style.fg),
        ("a", Some(Color::Yellow))
    );
    assert_eq!(
        (cell[1].content.as_ref(), cell[1].style.fg),
        ("        ", None)
    );
}

#[test]
fn table_shrinks_widest_columns_to_fit() {
    let text = "| id | description |\n|----|-------------|\n| 1 | a rather long description |";
    let lines = render(text, 20);
    assert_eq!(
        plain(&lines),
        [
            "id │ description",
            "───┼────────────────",
            "1  │ a rather long…"
        ]
    );
    assert_fits(&lines, 20, "table");
}

#[test]
fn horizontal_rule_spans_the_width() {
    let lines = render("---", 12);
    assert_eq!(plain(&lines), ["────────────"]);
    assert!(style_of(&lines, "─").add_modifier.contains(Modifier::DIM));
    assert_eq!(render_plain("> ***", 6), ["│ ────"]);
}

#[test]
fn html_passes_through_as_text() {
    assert_eq!(
        render_plain("<div>\n<b>hi</b>\n</div>\n\ntext <i>x</i>", 40),
        ["<div>", "<b>hi</b>", "</div>", "", "text <i>x</i>"]
    );
}

#[test]
fn control_characters_are_dropped() {
    let lines = render_plain("a\u{1b}[31mb\u{7}c", 40);
    assert_eq!(lines, ["a[31mbc"]);
}

#[test]
fn every_line_fits_the_width() {
    for width in [20, 40, 80] {
        let lines = render(MIXED, width);
        assert!(lines.len() > 20);
        assert_fits(&lines, width, &format!("width {width}"));
    }
}

#[test]
fn tiny_widths_do_not_panic() {
    for width in 0..=4 {
        for doc in [RICH, MIXED] {
            let lines = render(doc, width);
            assert!(!lines.is_empty());
            assert_fits(&lines, width, &format!("width {width}"));
        }
    }
}

#[test]
fn every_prefix_of_a_stream_renders() {
    let doc = format!("{RICH}\n{MIXED}");
    for (end, _) in doc.char_indices().chain([(doc.len(), ' ')]) {
        let prefix = &doc[..end];
        for width in [1, 23, 80] {
            let lines = render(prefix, width);
            assert_fits(&lines, width, &format!("prefix of {end} bytes"));
        }
    }
}

#[test]
fn snapshot_rich_answer() {
    insta::assert_snapshot!("rich_80", markup(&render(RICH, 80)));
}

#[test]
fn snapshot_rich_answer_narrow() {
    insta::assert_snapshot!("rich_32", markup(&render(RICH, 32)));
}

#[test]
fn snapshot_mixed_document() {
    insta::assert_snapshot!("mixed_40", markup(&render(MIXED, 40)));
}

#[test]
fn snapshot_code_languages() {
    let text = r#"```go
package main // entry
func main() { fmt.Println("hi", 0x1F, 'c') }
```

```js
const x = `tpl ${y}`; /* block
still block */ let z = 1.5e3;
```

```diff
@@ -1,2 +1,2 @@
-old
+new
```"#;
    insta::assert_snapshot!("code_languages", markup(&render(text, 60)));
}
