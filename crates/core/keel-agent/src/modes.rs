//! The agent's seams: typed hook points with a declared mode.
//!
//! Modes (see ARCHITECTURE.md, "Seams"):
//! - **observe**: called after the fact; an observer cannot change anything and its failures
//!   are contained (an observer that wants to fail logs instead).
//! - **waterfall**: an async middleware chain. Each hook receives the payload and a [`WaterfallNext`]; it
//!   may delegate (`next.run(payload)`), transform before or after delegating, or return without
//!   delegating to short-circuit. Hooks run in registration order, the built-in default last.
//! - **serial**: awaited one after another in registration order.
//! - **contributors**: each returns zero or more items; results are concatenated in order.
//!
//! Hooks are registered globally ([`HookRegistry`] of the host, inherited by child agents) or for
//! one agent (agent-scoped, not inherited). The tool pipeline's own seams (`tools/pre-execute`,
//! `tools/guard`, `tools/execute`, `tools/post-execute`, `tools/settled`) are declared in
//! `keel-tools` and held here in [`HookRegistry::tools`].

use futures::future::BoxFuture;
use std::sync::Arc;

/// A waterfall hook over input `I` producing `O`.
pub trait Middleware<I, O>: Send + Sync {
    /// Handle `input`; call `next.run(..)` to delegate to the rest of the chain.
    fn handle<'a>(&'a self, input: I, next: WaterfallNext<'a, I, O>) -> BoxFuture<'a, O>;
}

/// The rest of a waterfall chain.
pub struct WaterfallNext<'a, I, O> {
    rest: &'a [Arc<dyn Middleware<I, O>>],
    terminal: &'a (dyn Fn(I) -> BoxFuture<'a, O> + Send + Sync),
}

impl<'a, I: Send + 'a, O: Send + 'a> WaterfallNext<'a, I, O> {
    /// Run the rest of the chain (ending in the built-in default).
    pub fn run(self, input: I) -> BoxFuture<'a, O> {
        match self.rest.split_first() {
            Some((hook, rest)) => hook.handle(
                input,
                WaterfallNext {
                    rest,
                    terminal: self.terminal,
                },
            ),
            None => (self.terminal)(input),
        }
    }
}

/// An ordered waterfall chain.
pub struct Waterfall<I, O> {
    hooks: Vec<Arc<dyn Middleware<I, O>>>,
}

impl<I, O> Clone for Waterfall<I, O> {
    fn clone(&self) -> Self {
        Waterfall {
            hooks: self.hooks.clone(),
        }
    }
}

impl<I, O> Default for Waterfall<I, O> {
    fn default() -> Self {
        Waterfall { hooks: Vec::new() }
    }
}

impl<I: Send, O: Send> Waterfall<I, O> {
    /// Append a hook (runs after those registered before it).
    pub fn push(&mut self, hook: Arc<dyn Middleware<I, O>>) {
        self.hooks.push(hook);
    }

    /// Number of hooks.
    pub fn len(&self) -> usize {
        self.hooks.len()
    }

    /// True when no hook is registered (the default runs alone).
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// This chain followed by `other`'s hooks.
    pub fn extended(&self, other: &Waterfall<I, O>) -> Waterfall<I, O> {
        let mut hooks = self.hooks.clone();
        hooks.extend(other.hooks.iter().cloned());
        Waterfall { hooks }
    }

    /// Run the chain on `input`, ending in `terminal`.
    pub async fn run<'a>(
        &'a self,
        input: I,
        terminal: &'a (dyn Fn(I) -> BoxFuture<'a, O> + Send + Sync),
    ) -> O
    where
        I: 'a,
        O: 'a,
    {
        WaterfallNext {
            rest: &self.hooks,
            terminal,
        }
        .run(input)
        .await
    }
}

/// A waterfall hook written as a closure: `middleware(|input, next| Box::pin(async move { .. }))`.
pub fn middleware<I, O, F>(f: F) -> Arc<dyn Middleware<I, O>>
where
    I: Send + 'static,
    O: Send + 'static,
    F: for<'a> Fn(I, WaterfallNext<'a, I, O>) -> BoxFuture<'a, O> + Send + Sync + 'static,
{
    struct FnMiddleware<F>(F);
    impl<I, O, F> Middleware<I, O> for FnMiddleware<F>
    where
        F: for<'a> Fn(I, WaterfallNext<'a, I, O>) -> BoxFuture<'a, O> + Send + Sync,
    {
        fn handle<'a>(&'a self, input: I, next: WaterfallNext<'a, I, O>) -> BoxFuture<'a, O> {
            (self.0)(input, next)
        }
    }
    Arc::new(FnMiddleware(f))
}

/// An observer of `T`.
pub type Observer<T> = Arc<dyn Fn(&T) + Send + Sync>;

/// An awaited hook of `T` returning `R`.
pub type SerialHook<T, R> = Arc<dyn for<'a> Fn(&'a T) -> BoxFuture<'a, R> + Send + Sync>;

/// An ordered list of observers of `T`.
pub struct Observers<T: ?Sized> {
    list: Vec<Observer<T>>,
}

impl<T: ?Sized> Clone for Observers<T> {
    fn clone(&self) -> Self {
        Observers {
            list: self.list.clone(),
        }
    }
}

impl<T: ?Sized> Default for Observers<T> {
    fn default() -> Self {
        Observers { list: Vec::new() }
    }
}

impl<T: ?Sized> Observers<T> {
    /// Register an observer.
    pub fn push(&mut self, f: Observer<T>) {
        self.list.push(f);
    }

    /// Call every observer in order. A panicking observer is contained and does not stop the
    /// others (observers cannot change what happened).
    pub fn notify(&self, value: &T) {
        for f in &self.list {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(value)));
        }
    }

    /// This list followed by `other`'s observers.
    pub fn extended(&self, other: &Observers<T>) -> Observers<T> {
        let mut list = self.list.clone();
        list.extend(other.list.iter().cloned());
        Observers { list }
    }

    /// True when nobody listens.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

/// An ordered list of awaited (serial) hooks of `T` returning `R`.
pub struct Serial<T: ?Sized, R> {
    list: Vec<SerialHook<T, R>>,
}

impl<T: ?Sized, R> Clone for Serial<T, R> {
    fn clone(&self) -> Self {
        Serial {
            list: self.list.clone(),
        }
    }
}

impl<T: ?Sized, R> Default for Serial<T, R> {
    fn default() -> Self {
        Serial { list: Vec::new() }
    }
}

impl<T: ?Sized + Sync, R: Send> Serial<T, R> {
    /// Register a hook.
    pub fn push(&mut self, f: SerialHook<T, R>) {
        self.list.push(f);
    }

    /// Await every hook in order, collecting their results.
    pub async fn run(&self, value: &T) -> Vec<R> {
        let mut out = Vec::with_capacity(self.list.len());
        for f in &self.list {
            out.push(f(value).await);
        }
        out
    }

    /// This list followed by `other`'s hooks.
    pub fn extended(&self, other: &Serial<T, R>) -> Serial<T, R> {
        let mut list = self.list.clone();
        list.extend(other.list.iter().cloned());
        Serial { list }
    }

    /// True when no hook is registered.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}
