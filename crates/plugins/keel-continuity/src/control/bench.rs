//! [`AdmissionBench`]: one guarded call's admission on its own, for the criterion benches.

use super::*;

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
    ) -> Result<Self, String> {
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

    fn put(&self, c: &Contract) -> Result<(), String> {
        let mut st = self.controller.state();
        self.controller.commit(&mut st, c, "bench", Value::Null)
    }

    /// Issue a fresh authorization (and drop the lease of the last admitted call): the
    /// model's `control_checkpoint`.
    pub fn authorize(&mut self) -> Result<(), String> {
        let mut st = self.controller.state();
        let mut c = self
            .controller
            .load(&mut st)?
            .ok_or_else(|| "no contract".to_owned())?;
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
    pub fn admit(&mut self) -> Result<(), String> {
        self.admission().map(drop)
    }

    /// [`AdmissionBench::admit`], then wait until the record is durable (the guard's one
    /// fsync).
    pub fn admit_durable(&mut self) -> Result<(), String> {
        match self.admission()? {
            Some(t) => t.wait().map_err(|e| e.to_string()),
            None => Err("not bound to an agent".into()),
        }
    }

    fn admission(&mut self) -> Result<Option<FlushTicket>, String> {
        self.calls += 1;
        let id = format!("call-{}", self.calls);
        self.controller
            .admit(&id, "write", &json!({"path": "notes.txt", "content": "x"}))
    }
}
