//! The wire types of the agent API (`/api/v1/enroll`, `/api/v1/agent/*`): defined once in the
//! `hearth-api` crate, shared with the agent and the CLI, and re-exported here.

pub use hearth_api::{
    AgentStatus, DesiredConfig, EnrollRequest, EnrollResponse, HistoryItem, NodeState, SlotAction,
    SlotAnswer, SlotRequest,
};
