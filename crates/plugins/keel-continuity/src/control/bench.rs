//! [`AdmissionBench`]: one guarded call's admission on its own, for the criterion benches.

use super::*;

/// Why a bench step failed.
#[doc(hidden)]
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The contract could not be read, logged or written.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// There is no contract to authorize against.
    #[error("no contract")]
    NoContract,
    /// The guard refused the call (its reason).
    #[error("{0}")]
    Refused(super::Refusal),
    /// The admission's record could not be made durable.
    #[error("{0}")]
    Durable(keel_session::store::StoreError),
    /// The controller has no agent to log to.
    #[error("not bound to an agent")]
    Unbound,
}

/// Guard admission on a real agent's log, for `benches/continuity.rs`: a controller in
/// contract mode, bound to `agent`, over an open contract. An admission does what the guard
/// does: check the contract (its file's stamp, not its bytes, when unchanged), consume the
/// authorization, take the lease and log the change; [`AdmissionBench::admit_durable`] also
/// waits for that record's fsync. Not a stable API.
#[doc(hidden)]
pub struct AdmissionBench {
    controller: Arc<Controller>,
    calls: u64,
}

#[doc(hidden)]
impl AdmissionBench {
    /// An open contract (targets `.`) for `agent`'s task, under `keel_home`.
    pub fn new(
        agent: &AgentHandle,
        keel_home: &std::path::Path,
        cwd: &std::path::Path,
    ) -> Result<Self, BenchError> {
        let controller = Controller::new(
            ControlMode::Contract,
            default_guarded_tools(),
            cwd.to_owned(),
            keel_home,
        );
        controller.bind(agent);
        let root = controller.state().root.clone();
        let bench = AdmissionBench {
            controller,
            calls: 0,
        };
        let targets = vec![".".to_owned()];
        let c = Contract {
            schema_version: contract::CONTRACT_SCHEMA_VERSION,
            root_session_id: root,
            revision: 1,
            opened_at_seq: 0,
            objective: "bench".into(),
            acceptance: vec!["fast".into()],
            constraints: Vec::new(),
            targets_digest: contract::targets_digest(&targets),
            targets,
            fence: contract::Fence::default(),
            authorization: None,
            issued: 0,
            leases: Vec::new(),
        };
        bench.put(&c)?;
        Ok(bench)
    }

    fn put(&self, c: &Contract) -> Result<(), BenchError> {
        let mut st = self.controller.state();
        Ok(self.controller.commit(&mut st, c, "bench", Value::Null)?)
    }

    /// Issue a fresh authorization (and drop the lease of the last admitted call): the
    /// model's `control_checkpoint`.
    pub fn authorize(&mut self) -> Result<(), BenchError> {
        let mut st = self.controller.state();
        let mut c = self
            .controller
            .load(&mut st)?
            .ok_or(BenchError::NoContract)?;
        st.admitted.clear();
        drop(st);
        c.issued += 1;
        c.leases.clear();
        c.authorization = Some(Authorization {
            id: format!("auth-{}", c.issued),
            revision: c.revision,
            targets_digest: c.targets_digest.clone(),
            intent: "bench".into(),
            paths: Vec::new(),
            used: false,
            revoked: None,
        });
        self.put(&c)
    }

    /// Admit one guarded `write` through the current authorization; its record's fsync is
    /// not waited for.
    pub fn admit(&mut self) -> Result<(), BenchError> {
        self.admission().map(drop)
    }

    /// [`AdmissionBench::admit`], then wait until the record is durable (the guard's one
    /// fsync).
    pub fn admit_durable(&mut self) -> Result<(), BenchError> {
        match self.admission()? {
            Some(t) => t.wait().map_err(BenchError::Durable),
            None => Err(BenchError::Unbound),
        }
    }

    fn admission(&mut self) -> Result<Option<FlushTicket>, BenchError> {
        self.calls += 1;
        let id = format!("call-{}", self.calls);
        self.controller
            .admit(&id, "write", &json!({"path": "notes.txt", "content": "x"}))
            .map_err(BenchError::Refused)
    }
}
