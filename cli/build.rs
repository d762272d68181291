//! Records the git commit being built as `HEARTH_BUILD_COMMIT`, for `hearth version` (the client
//! side): the same script as the server's, which answers `GET /api/v1/version`.

include!("../server/build.rs");
