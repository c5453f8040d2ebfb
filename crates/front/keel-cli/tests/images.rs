//! End-to-end images: `keel run --image FILE` and the `read_image` tool, through the real
//! `keel` binary against the loopback mock model. An image reaches the request as an
//! `image_url` part carrying a `data:` URL of the file's bytes (stored once, by content, under
//! `$KEEL_HOME/attachments`, and only referenced from the session log); a model without vision
//! is refused before any request; a file that is not an image is refused naming it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use base64::Engine as _;
use pretty_assertions::assert_eq;
use serde_json::Value;
use sha2::Digest as _;
use support::*;

/// A real 1×1 PNG.
const PNG: &[u8] = b"\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00\x90\x77\x53\xde\x00\x00\x00\x0c\x49\x44\x41\x54\x78\x9c\x63\xf8\xcf\xc0\x00\x00\x03\x01\x01\x00\xc9\xfe\x92\xef\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82";

const ONE_ANSWER: &str = "responses:\n  - text: \"A red dot.\"\n";

/// The model the tests declare vision-capable in `$KEEL_HOME/config.toml`.
const SEEING: &str = "seeing-model";

fn with_seeing_model(env: &Env) {
    std::fs::write(
        env.home.join("config.toml"),
        format!("[models.\"{SEEING}\"]\nvision = true\n"),
    )
    .unwrap();
}

fn data_url() -> String {
    format!(
        "data:image/png;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(PNG)
    )
}

/// The `image_url` URLs of a request's user messages, in order.
fn image_urls(request: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for m in request["messages"].as_array().unwrap() {
        if m["role"] != "user" {
            continue;
        }
        for part in m["content"].as_array().into_iter().flatten() {
            if part["type"] == "image_url" {
                out.push(part["image_url"]["url"].as_str().unwrap().to_owned());
            }
        }
    }
    out
}

fn attachments(env: &Env) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(env.home.join("attachments"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

fn sha_name() -> String {
    let sha = sha2::Sha256::digest(PNG);
    let hex: String = sha.iter().map(|b| format!("{b:02x}")).collect();
    format!("{hex}.png")
}

#[test]
fn a_prompt_image_reaches_a_vision_model_as_an_image_part() {
    let env = Env::new();
    with_seeing_model(&env);
    std::fs::write(env.ws.join("a.png"), PNG).unwrap();
    let mock = Mock::start(ONE_ANSWER);
    let out = run(env.keel(&mock.base_url()).args([
        "--model",
        SEEING,
        "run",
        "--image",
        "a.png",
        "What is in the picture?",
    ]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(out.stdout.trim(), "A red dot.");

    let requests = mock.requests();
    assert_eq!(requests.len(), 1);
    let request = &requests[0];
    assert_wire_valid(request);
    let user = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap();
    let parts = user["content"].as_array().expect("parts");
    let texts: Vec<&str> = parts.iter().filter_map(|p| p["text"].as_str()).collect();
    assert!(
        texts.iter().any(|t| t.contains("What is in the picture?")),
        "{user}"
    );
    assert_eq!(image_urls(request), vec![data_url()]);
    assert!(tool_names(request).contains(&"read_image".to_owned()));

    // Stored once by content; the log references it and holds no image bytes.
    let name = sha_name();
    assert_eq!(attachments(&env), vec![name.clone()]);
    assert_eq!(
        std::fs::read(env.home.join("attachments").join(&name)).unwrap(),
        PNG
    );
    let log = std::fs::read_to_string(env.only_session()).unwrap();
    assert!(log.contains(&format!("keel-attachment:{name}")), "{log}");
    let b64 = base64::engine::general_purpose::STANDARD.encode(PNG);
    assert!(!log.contains(&b64), "the session log holds the image bytes");
}

#[test]
fn a_model_without_vision_is_refused_before_any_request() {
    let env = Env::new();
    std::fs::write(env.ws.join("a.png"), PNG).unwrap();
    let mock = Mock::start(ONE_ANSWER);
    let out = run(env.keel(&mock.base_url()).args([
        "--model",
        "deepseek-chat",
        "run",
        "--image",
        "a.png",
        "hi",
    ]));
    assert_ne!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let err = &out.stderr;
    assert!(
        err.contains("model deepseek-chat does not read images")
            && err.contains("--image a.png")
            && err.contains("vision = true"),
        "stderr:\n{err}"
    );
    assert_eq!(mock.requests().len(), 0, "a request was sent");
    assert_eq!(env.session_files(), Vec::<std::path::PathBuf>::new());
    assert_eq!(attachments(&env), Vec::<String>::new());

    // The same model without --image runs, and is not offered read_image.
    let out = run(env
        .keel(&mock.base_url())
        .args(["--model", "deepseek-chat", "run", "hi"]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    let requests = mock.requests();
    assert!(!tool_names(&requests[0]).contains(&"read_image".to_owned()));
}

#[test]
fn a_file_that_is_not_an_image_is_refused_naming_it() {
    let env = Env::new();
    with_seeing_model(&env);
    env.write("notes.txt", "just some notes\n");
    let mock = Mock::start(ONE_ANSWER);
    let out = run(env.keel(&mock.base_url()).args([
        "--model",
        SEEING,
        "run",
        "--image",
        "notes.txt",
        "hi",
    ]));
    assert_ne!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert!(
        out.stderr
            .contains("notes.txt is not an image keel can send: it is not PNG, JPEG, GIF or WebP"),
        "stderr:\n{}",
        out.stderr
    );
    let out = run(env
        .keel(&mock.base_url())
        .args(["--model", SEEING, "run", "--image", "nope.png", "hi"]));
    assert_ne!(out.code, Some(0));
    assert!(out.stderr.contains("nope.png"), "stderr:\n{}", out.stderr);
    assert_eq!(mock.requests().len(), 0, "a request was sent");
    assert_eq!(env.session_files(), Vec::<std::path::PathBuf>::new());
}

const READ_IMAGES: &str = r#"
responses:
  - tool_calls:
      - { id: c_png, name: read_image, arguments: { file_path: pics/a.png } }
      - { id: c_txt, name: read_image, arguments: { path: notes.txt } }
  - text: "The picture is a red dot; notes.txt is text."
"#;

#[test]
fn read_image_shows_the_image_to_the_model_and_refuses_a_non_image() {
    let env = Env::new();
    with_seeing_model(&env);
    std::fs::create_dir_all(env.ws.join("pics")).unwrap();
    std::fs::write(env.ws.join("pics/a.png"), PNG).unwrap();
    env.write("notes.txt", "just some notes\n");
    let mock = Mock::start(READ_IMAGES);
    let out =
        run(env
            .keel(&mock.base_url())
            .args(["--model", SEEING, "run", "Look at the files."]));
    assert_eq!(out.code, Some(0), "stderr:\n{}", out.stderr);
    assert_eq!(
        out.stdout.trim(),
        "The picture is a red dot; notes.txt is text."
    );

    let requests = mock.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(image_urls(&requests[0]), Vec::<String>::new());
    let answered = assert_wire_valid(&requests[1]);
    assert_eq!(answered.len(), 2);
    assert_eq!(answered[0].0, "c_png");
    assert!(
        answered[0].1.contains("pics/a.png: image/png, 69 bytes"),
        "{answered:?}"
    );
    assert_eq!(answered[1].0, "c_txt");
    assert!(
        answered[1]
            .1
            .contains("notes.txt is not an image keel can send"),
        "{answered:?}"
    );
    // The image follows the tool messages as a user image part.
    assert_eq!(image_urls(&requests[1]), vec![data_url()]);
    let messages = requests[1]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user", "{last}");
    assert_eq!(messages[messages.len() - 2]["role"], "tool");

    let events = load_consistent(&env.only_session());
    let results = tool_results(&events);
    assert_eq!(results.len(), 2);
    assert!(!results[0].2 && results[1].2, "{results:?}");
    assert_eq!(attachments(&env), vec![sha_name()]);
}
