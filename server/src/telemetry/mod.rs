//! What the server tells its operators: Prometheus metrics (`GET /metrics`) and the log (the
//! journal under systemd), including the fleet's committed events, logged within a budget.

pub mod logging;
pub mod metrics;
