//! `hearth`: the admin CLI.
//!
//! The offline commands work on manifests alone, with no server and no host changes:
//! `validate`, `render`, `plan` and `convert`. Exit codes: 0 success, 1 invalid input (every
//! problem is printed to stderr, one per line, with file, line, object and field), 2 usage error.

pub mod files;
pub mod out;
pub mod remote;
pub mod term;
mod usage;
pub mod yaml;

use anyhow::anyhow;
use clap::{Args, Parser, Subcommand, ValueEnum};
use hearth_config::diag::Diagnostic;
use hearth_config::ignition::SpecVersion;
use hearth_config::manifest::{read_machine_config, read_str_with, FieldValidation, Manifests};
use hearth_config::model::{MachineConfig, MachineConfigSpec};
use hearth_config::{plan, render};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use usage::{read_text, Format, InvalidInput, Usage};

/// The CLI's arguments.
#[derive(Debug, Parser)]
#[command(
    name = "hearth",
    version,
    about = "Keep the OS configuration of bare-metal fleets as declared (MachineConfigs, without Kubernetes)",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Check manifests: one line per problem on stderr, exit 1 if any error.
    Validate {
        #[command(flatten)]
        input: Input,
        /// Output format for the summary and problems.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Render a pool (or one node) into a single rendered MachineConfig.
    Render {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        input: Input,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = DocFormat::Yaml)]
        output: DocFormat,
    },
    /// Show what a node must do to go from one rendered config to another, and the disruption.
    Plan {
        /// The node's current config (a MachineConfig file). Omitted: a node with no config yet.
        #[arg(long, value_name = "FILE")]
        from: Option<PathBuf>,
        /// The desired config (a MachineConfig file).
        #[arg(long, value_name = "FILE", conflicts_with = "node")]
        to: Option<PathBuf>,
        /// Instead of --to, render this node from the manifests given with -f.
        #[arg(long, value_name = "NAME", requires = "files")]
        node: Option<String>,
        /// Manifests (with --node), also read for MachineConfiguration node-disruption policies:
        /// a file, a directory or `-`; repeat -f for several.
        #[arg(short = 'f', long = "filename", value_name = "PATH")]
        files: Vec<PathBuf>,
        /// Also read the subdirectories of -f directories.
        #[arg(short = 'R', long)]
        recursive: bool,
        /// What a field no schema has is in the -f manifests: `strict` (an error), `warn` or
        /// `ignore`.
        #[arg(long, value_name = "MODE", default_value = "strict")]
        validate: FieldValidation,
        /// Output format.
        #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Text)]
        output: Format,
    },
    /// Print the Ignition config a first-booting node of a given spec version would receive.
    Convert {
        /// Ignition spec version to produce (2.2.0 to 2.4.0, 3.0.0 to 3.5.0).
        #[arg(long, value_name = "VERSION")]
        ignition_version: String,
        /// A MachineConfig file (rendered or not).
        #[arg(short = 'f', long = "filename", value_name = "FILE")]
        file: PathBuf,
    },
    /// Save the server's URL, CA and admin token for the commands below.
    Login(remote::LoginArgs),
    /// Apply manifests to the server (all or nothing).
    Apply(remote::ApplyArgs),
    /// List objects on the server: mc, mcp, nodes, events.
    Get(remote::GetArgs),
    /// Show one node or pool in detail, with its events.
    Describe(remote::DescribeArgs),
    /// Delete MachineConfigs, pools or nodes on the server.
    Delete(remote::DeleteArgs),
    /// Set (k=v) or remove (k-) labels of a node.
    Label(remote::LabelArgs),
    /// Pause a pool's rollouts.
    Pause(remote::PauseArgs),
    /// Resume a pool's rollouts.
    Resume(remote::PauseArgs),
    /// Roll a pool back to its previous rendered config: `hearth rollback mcp POOL`.
    Rollback(remote::RollbackArgs),
    /// Make a new bootstrap token for a pool (replacing the old one) and print it.
    BootstrapToken(remote::TokenArgs),
    /// Read-only tokens for the dashboard (`<server>/ui/`): `hearth viewer-token create|delete`.
    ViewerToken(remote::ViewerArgs),
    /// Follow a pool's rollout: `hearth rollout status POOL [--watch]`.
    Rollout(remote::RolloutArgs),
    /// Act on one node: `hearth node reset-credential NODE`.
    Node(remote::NodeArgs),
    /// Print the client's and the server's version and commit.
    Version(remote::VersionArgs),
}

#[derive(Debug, Args)]
struct Input {
    /// A manifest file, a directory (its *.yaml, *.yml and *.json files) or `-` (stdin);
    /// repeat -f for several.
    #[arg(short = 'f', long = "filename", value_name = "PATH", required = true)]
    files: Vec<PathBuf>,
    /// Also read the subdirectories of -f directories.
    #[arg(short = 'R', long)]
    recursive: bool,
    /// What a field no schema has is (a typo, most often): `strict`, an error naming the field it
    /// likely misspells; `warn`, a warning, the field ignored; `ignore`, nothing.
    #[arg(long, value_name = "MODE", default_value = "strict")]
    validate: FieldValidation,
}

#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
struct Target {
    /// The pool to render.
    #[arg(long, value_name = "NAME")]
    pool: Option<String>,
    /// The node to render (its pool is chosen by its labels; its overlays are merged last).
    #[arg(long, value_name = "NAME")]
    node: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum DocFormat {
    Yaml,
    Json,
}

/// Runs the CLI with `args` (including the program name) and returns the exit code.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<InvalidInput>() => ExitCode::from(1),
        Err(e) if e.is::<Usage>() => {
            eprintln!("error: {}", term::escape_keep_newlines(&e.to_string()));
            ExitCode::from(2)
        }
        Err(e) => {
            // The chain may quote the server or a manifest: escaped like every other output.
            eprintln!("error: {}", term::escape_keep_newlines(&format!("{e:#}")));
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Validate { input, output } => validate(&input, output),
        Command::Render {
            target,
            input,
            output,
        } => render_cmd(&target, &input, output),
        Command::Plan {
            from,
            to,
            node,
            files,
            recursive,
            validate,
            output,
        } => plan_cmd(
            from.as_deref(),
            to.as_deref(),
            node.as_deref(),
            &Input {
                files,
                recursive,
                validate,
            },
            output,
        ),
        Command::Convert {
            ignition_version,
            file,
        } => convert(&ignition_version, &file),
        Command::Login(a) => remote::login(&a),
        Command::Apply(a) => remote::apply(&a),
        Command::Get(a) => remote::get(&a),
        Command::Describe(a) => remote::describe(&a),
        Command::Delete(a) => remote::delete(&a),
        Command::Label(a) => remote::label(&a),
        Command::Pause(a) => remote::pause(&a, true),
        Command::Resume(a) => remote::pause(&a, false),
        Command::Rollback(a) => remote::rollback(&a),
        Command::BootstrapToken(a) => remote::bootstrap_token(&a),
        Command::ViewerToken(a) => remote::viewer_token(&a),
        Command::Rollout(a) => remote::rollout(&a),
        Command::Node(a) => remote::node(&a),
        Command::Version(a) => remote::version(&a),
    }
}

/// Reads every manifest `input` names (see [`files`]).
fn load(input: &Input) -> anyhow::Result<(Manifests, Vec<Diagnostic>, usize)> {
    let files = files::manifest_files(&input.files, input.recursive)?;
    let mut all = Manifests::default();
    let mut diags = Vec::new();
    for f in &files {
        let text = read_text(f)?;
        let (m, d) = read_str_with(&f.display().to_string(), &text, input.validate);
        all.extend(m);
        diags.extend(d);
    }
    Ok((all, diags, files.len()))
}

fn print_diagnostics(diags: &[Diagnostic]) {
    let stderr = std::io::stderr();
    let mut err = stderr.lock();
    for d in diags {
        // A manifest's text (names, paths) can carry control characters: escaped.
        let _ = writeln!(err, "{}", term::escape(&d.to_string()));
    }
}

/// Prints diagnostics; fails when any is an error.
fn check(diags: &[Diagnostic]) -> anyhow::Result<()> {
    print_diagnostics(diags);
    if diags.iter().any(Diagnostic::is_error) {
        return Err(InvalidInput.into());
    }
    Ok(())
}

fn validate(input: &Input, output: Format) -> anyhow::Result<()> {
    let (m, diags, files) = load(input)?;
    let errors = diags.iter().filter(|d| d.is_error()).count();
    let warnings = diags.len() - errors;
    match output {
        Format::Json => {
            let v = serde_json::json!({
                "files": files,
                "machineConfigs": m.machine_configs.len(),
                "pools": m.pools.len(),
                "nodes": m.nodes.len(),
                "errors": errors,
                "warnings": warnings,
                "problems": diags,
            });
            crate::outln!("{}", term::json_safe(&serde_json::to_string_pretty(&v)?));
            if errors > 0 {
                return Err(InvalidInput.into());
            }
            Ok(())
        }
        Format::Text => {
            print_diagnostics(&diags);
            if errors > 0 {
                eprintln!("{errors} error(s), {warnings} warning(s) in {files} file(s)");
                return Err(InvalidInput.into());
            }
            crate::outln!(
                "ok: {} MachineConfig(s), {} pool(s), {} node(s) in {files} file(s){}",
                m.machine_configs.len(),
                m.pools.len(),
                m.nodes.len(),
                if warnings > 0 {
                    format!(", {warnings} warning(s)")
                } else {
                    String::new()
                }
            );
            Ok(())
        }
    }
}

fn items<T: Clone>(v: &[hearth_config::model::Sourced<T>]) -> Vec<T> {
    v.iter().map(|s| s.item.clone()).collect()
}

/// Renders the target of `render`/`plan --node`: the rendered config.
fn render_target(
    m: &Manifests,
    pool: Option<&str>,
    node: Option<&str>,
) -> anyhow::Result<MachineConfig> {
    let pools = render::with_builtin_pools(&items(&m.pools));
    let configs = items(&m.machine_configs);
    let result = match (pool, node) {
        (Some(p), _) => {
            let pool = pools
                .iter()
                .find(|x| x.name() == p)
                .ok_or_else(|| anyhow!("{}", render::RenderError::UnknownPool(p.to_string())))?;
            render::render_pool(pool, &configs)
        }
        (None, Some(n)) => {
            render::render_node(&pools, &configs, &items(&m.nodes), n).map(|r| r.config)
        }
        (None, None) => return Err(Usage("give --pool or --node".into()).into()),
    };
    result.map_err(|e| anyhow!("{e}"))
}

fn print_doc(value: &serde_json::Value, format: DocFormat) -> anyhow::Result<()> {
    match format {
        DocFormat::Json => {
            crate::outln!("{}", term::json_safe(&serde_json::to_string_pretty(value)?))
        }
        DocFormat::Yaml => crate::out!("{}", yaml::to_string(value)),
    }
    Ok(())
}

fn render_cmd(target: &Target, input: &Input, output: DocFormat) -> anyhow::Result<()> {
    let (m, diags, _) = load(input)?;
    check(&diags)?;
    let rendered = render_target(&m, target.pool.as_deref(), target.node.as_deref())?;
    print_doc(&rendered.to_manifest(), output)
}

fn read_spec(path: &Path) -> anyhow::Result<MachineConfigSpec> {
    let text = read_text(path)?;
    match read_machine_config(&path.display().to_string(), &text) {
        Ok((mc, warnings)) => {
            print_diagnostics(&warnings);
            Ok(mc.spec)
        }
        Err(diags) => {
            print_diagnostics(&diags);
            Err(InvalidInput.into())
        }
    }
}

fn plan_cmd(
    from: Option<&Path>,
    to: Option<&Path>,
    node: Option<&str>,
    input: &Input,
    output: Format,
) -> anyhow::Result<()> {
    let (m, diags, _) = if input.files.is_empty() {
        (Manifests::default(), Vec::new(), 0)
    } else {
        load(input)?
    };
    check(&diags)?;
    let current = match from {
        Some(p) => read_spec(p)?,
        None => MachineConfigSpec::default(),
    };
    let (desired, desired_name) = match (to, node) {
        (Some(p), _) => (read_spec(p)?, p.display().to_string()),
        (None, Some(n)) => {
            let mc = render_target(&m, None, Some(n))?;
            let name = mc.name().to_string();
            (mc.spec, name)
        }
        (None, None) => return Err(Usage("give --to FILE, or --node NAME with -f".into()).into()),
    };
    let policies = m.disruption_policies();
    let p = plan::plan(&current, &desired, &policies);
    match output {
        Format::Json => crate::outln!("{}", term::json_safe(&serde_json::to_string_pretty(&p)?)),
        Format::Text => {
            crate::outln!(
                "Plan from {} to {desired_name}:",
                from.map(|f| f.display().to_string())
                    .unwrap_or_else(|| "an unconfigured node".to_string())
            );
            crate::out!("{}", term::escape_keep_newlines(&p.to_string()));
            if !desired.actions.is_empty() {
                crate::outln!(
                    "run-once actions (each node runs each once for this rendered config, unless it already did):"
                );
                for a in &desired.actions {
                    crate::outln!(
                        "  {}: {}, on failure {}, timeout {} s",
                        term::escape(&a.name),
                        a.when,
                        a.failure,
                        a.timeout_seconds
                    );
                }
            }
        }
    }
    Ok(())
}

fn convert(version: &str, file: &Path) -> anyhow::Result<()> {
    let Some(v) = SpecVersion::parse(version) else {
        return Err(Usage(format!(
            "unsupported Ignition version {version:?}; hearth produces {}",
            SpecVersion::supported_list()
        ))
        .into());
    };
    let mut spec = read_spec(file)?;
    // What the server serves at first boot: files without `overwrite` get `true`.
    hearth_config::mco::default_file_overwrite(&mut spec.config);
    match spec.config.to_version(v) {
        Ok(value) => {
            crate::outln!(
                "{}",
                term::json_safe(&serde_json::to_string_pretty(&value)?)
            );
            Ok(())
        }
        Err(errors) => {
            for e in errors {
                eprintln!(
                    "{}: error: spec.config.{}: {}",
                    file.display(),
                    e.path,
                    e.message
                );
            }
            Err(InvalidInput.into())
        }
    }
}
