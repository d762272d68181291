# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_hearth_global_optspecs
    string join \n h/help V/version
end

function __fish_hearth_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_hearth_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_hearth_using_subcommand
    set -l cmd (__fish_hearth_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c hearth -n "__fish_hearth_needs_command" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_needs_command" -s V -l version -d 'Print version'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "validate" -d 'Check manifests: one line per problem on stderr, exit 1 if any error'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "render" -d 'Render a pool (or one node) into a single rendered MachineConfig'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "plan" -d 'Show what a node must do to go from one rendered config to another, and the disruption'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "convert" -d 'Print the Ignition config a first-booting node of a given spec version would receive'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "login" -d 'Save the server\'s URL, CA and admin token for the commands below'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "apply" -d 'Apply manifests to the server (all or nothing)'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "get" -d 'List objects on the server: mc, mcp, nodes, events'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "describe" -d 'Show one node or pool in detail, with its events'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "delete" -d 'Delete MachineConfigs, pools or nodes on the server'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "label" -d 'Set (k=v) or remove (k-) labels of a node'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "pause" -d 'Pause a pool\'s rollouts'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "resume" -d 'Resume a pool\'s rollouts'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "rollback" -d 'Roll a pool back to its previous rendered config: `hearth rollback mcp POOL`'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "bootstrap-token" -d 'Make a new bootstrap token for a pool (replacing the old one) and print it'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "viewer-token" -d 'Read-only tokens for the dashboard (`<server>/ui/`): `hearth viewer-token create|delete`'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "rollout" -d 'Follow a pool\'s rollout: `hearth rollout status POOL [--watch]`'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "node" -d 'Act on one node: `hearth node reset-credential NODE`'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "version" -d 'Print the client\'s and the server\'s version and commit'
complete -c hearth -n "__fish_hearth_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c hearth -n "__fish_hearth_using_subcommand validate" -s f -l filename -d 'A manifest file, a directory (its *.yaml, *.yml and *.json files) or `-` (stdin); repeat -f for several' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand validate" -l validate -d 'What a field no schema has is (a typo, most often): `strict`, an error naming the field it likely misspells; `warn`, a warning, the field ignored; `ignore`, nothing' -r
complete -c hearth -n "__fish_hearth_using_subcommand validate" -s o -l output -d 'Output format for the summary and problems' -r -f -a "text\t''
json\t''"
complete -c hearth -n "__fish_hearth_using_subcommand validate" -s R -l recursive -d 'Also read the subdirectories of -f directories'
complete -c hearth -n "__fish_hearth_using_subcommand validate" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand render" -l pool -d 'The pool to render' -r
complete -c hearth -n "__fish_hearth_using_subcommand render" -l node -d 'The node to render (its pool is chosen by its labels; its overlays are merged last)' -r
complete -c hearth -n "__fish_hearth_using_subcommand render" -s f -l filename -d 'A manifest file, a directory (its *.yaml, *.yml and *.json files) or `-` (stdin); repeat -f for several' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand render" -l validate -d 'What a field no schema has is (a typo, most often): `strict`, an error naming the field it likely misspells; `warn`, a warning, the field ignored; `ignore`, nothing' -r
complete -c hearth -n "__fish_hearth_using_subcommand render" -s o -l output -d 'Output format' -r -f -a "yaml\t''
json\t''"
complete -c hearth -n "__fish_hearth_using_subcommand render" -s R -l recursive -d 'Also read the subdirectories of -f directories'
complete -c hearth -n "__fish_hearth_using_subcommand render" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand plan" -l from -d 'The node\'s current config (a MachineConfig file). Omitted: a node with no config yet' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand plan" -l to -d 'The desired config (a MachineConfig file)' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand plan" -l node -d 'Instead of --to, render this node from the manifests given with -f' -r
complete -c hearth -n "__fish_hearth_using_subcommand plan" -s f -l filename -d 'Manifests (with --node), also read for MachineConfiguration node-disruption policies: a file, a directory or `-`; repeat -f for several' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand plan" -l validate -d 'What a field no schema has is in the -f manifests: `strict` (an error), `warn` or `ignore`' -r
complete -c hearth -n "__fish_hearth_using_subcommand plan" -s o -l output -d 'Output format' -r -f -a "text\t''
json\t''"
complete -c hearth -n "__fish_hearth_using_subcommand plan" -s R -l recursive -d 'Also read the subdirectories of -f directories'
complete -c hearth -n "__fish_hearth_using_subcommand plan" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand convert" -l ignition-version -d 'Ignition spec version to produce (2.2.0 to 2.4.0, 3.0.0 to 3.5.0)' -r
complete -c hearth -n "__fish_hearth_using_subcommand convert" -s f -l filename -d 'A MachineConfig file (rendered or not)' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand convert" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand login" -l server -d 'The server\'s URL; several (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand login" -l ca -d 'The server\'s CA certificate (the server prints its path at first start)' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand login" -l token -d 'The admin token (`admin.token` in the server\'s state directory)' -r
complete -c hearth -n "__fish_hearth_using_subcommand login" -l client-cert -d 'Or an admin client certificate (`hearth-server issue-admin-cert`); the login file keeps its path' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand login" -l client-key -d 'The client certificate\'s key; the login file keeps its path' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand login" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand apply" -s f -l filename -d 'A manifest file, a directory (its *.yaml, *.yml and *.json files) or `-` (stdin); repeat -f for several. All are applied together: if any is invalid, nothing is applied' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand apply" -l validate -d 'What a field no schema has is (a typo, most often): `strict`, an error naming the field it likely misspells, nothing applied; `warn`, a warning, the field ignored; `ignore`, nothing (the server\'s `?fieldValidation=`)' -r
complete -c hearth -n "__fish_hearth_using_subcommand apply" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand apply" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand apply" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand apply" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand apply" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand apply" -s R -l recursive -d 'Also read the subdirectories of -f directories'
complete -c hearth -n "__fish_hearth_using_subcommand apply" -l dry-run -d 'Check and report what would change, store nothing'
complete -c hearth -n "__fish_hearth_using_subcommand apply" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand get" -s o -l output -d 'Output format (default: a table)' -r -f -a "wide\t'More columns'
json\t'JSON'
yaml\t'YAML'
name\t'`kind/name` per line'"
complete -c hearth -n "__fish_hearth_using_subcommand get" -s l -l selector -d 'Only objects whose labels match: `key=value`, `key!=value`, `key`, `!key`, separated by commas (all must match)' -r
complete -c hearth -n "__fish_hearth_using_subcommand get" -l for -d 'Events: only those of one object, `node/NAME` or `pool/NAME` (`mcp/NAME`)' -r
complete -c hearth -n "__fish_hearth_using_subcommand get" -l type -d 'Events: only those of one type (`warning` lists what went wrong: degraded nodes, halted rollouts, failed renders, admins\' exclusions)' -r -f -a "normal\t'Routine'
warning\t'Something went wrong'"
complete -c hearth -n "__fish_hearth_using_subcommand get" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand get" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand get" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand get" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand get" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand get" -l no-headers -d 'Tables: leave out the header line'
complete -c hearth -n "__fish_hearth_using_subcommand get" -s w -l watch -d 'After the list, print each row that changes (or, for events, each new event) until interrupted; the server is asked every 2 seconds'
complete -c hearth -n "__fish_hearth_using_subcommand get" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c hearth -n "__fish_hearth_using_subcommand describe" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand describe" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand describe" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand describe" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand describe" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand describe" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c hearth -n "__fish_hearth_using_subcommand delete" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand delete" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand delete" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand delete" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand delete" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand delete" -l force -d 'Delete a pool even though nodes are in it (they go to the pool their labels select without it; its bootstrap token stops working)'
complete -c hearth -n "__fish_hearth_using_subcommand delete" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c hearth -n "__fish_hearth_using_subcommand label" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand label" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand label" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand label" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand label" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand label" -l overwrite -d 'Change a label that already has another value'
complete -c hearth -n "__fish_hearth_using_subcommand label" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c hearth -n "__fish_hearth_using_subcommand pause" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand pause" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand pause" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand pause" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand pause" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand pause" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c hearth -n "__fish_hearth_using_subcommand resume" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand resume" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand resume" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand resume" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand resume" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand resume" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c hearth -n "__fish_hearth_using_subcommand rollback" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand rollback" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand rollback" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand rollback" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand rollback" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand rollback" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c hearth -n "__fish_hearth_using_subcommand bootstrap-token" -l ttl -d 'Validity in seconds (default: the server\'s --bootstrap-token-ttl, 24 h; 0: no expiry)' -r
complete -c hearth -n "__fish_hearth_using_subcommand bootstrap-token" -l node -d 'A first-boot token bound to this one node (not yet enrolled): `/config/POOL` with it serves the node\'s own config (its pool\'s plus its overlays, e.g. static addresses), and it enrolls only this name. The pool\'s token stays valid' -r
complete -c hearth -n "__fish_hearth_using_subcommand bootstrap-token" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand bootstrap-token" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand bootstrap-token" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand bootstrap-token" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand bootstrap-token" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand bootstrap-token" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and not __fish_seen_subcommand_from create delete help" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and not __fish_seen_subcommand_from create delete help" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and not __fish_seen_subcommand_from create delete help" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and not __fish_seen_subcommand_from create delete help" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and not __fish_seen_subcommand_from create delete help" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and not __fish_seen_subcommand_from create delete help" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and not __fish_seen_subcommand_from create delete help" -f -a "create" -d 'Make a read-only token and print it (shown once); its name goes to stderr'
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and not __fish_seen_subcommand_from create delete help" -f -a "delete" -d 'Revoke a viewer token by its name (`viewer-…`)'
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and not __fish_seen_subcommand_from create delete help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and __fish_seen_subcommand_from create" -l ttl -d 'Validity in seconds (default: until revoked)' -r
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and __fish_seen_subcommand_from create" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and __fish_seen_subcommand_from delete" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and __fish_seen_subcommand_from help" -f -a "create" -d 'Make a read-only token and print it (shown once); its name goes to stderr'
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and __fish_seen_subcommand_from help" -f -a "delete" -d 'Revoke a viewer token by its name (`viewer-…`)'
complete -c hearth -n "__fish_hearth_using_subcommand viewer-token; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and not __fish_seen_subcommand_from status help" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and not __fish_seen_subcommand_from status help" -f -a "status" -d 'How far a pool\'s rollout is: per node, and the pool\'s counts; exit 1 when it is halted by a degraded node. With --watch, follow it until every node runs the target (exit 0), it halts on a degraded node or --timeout passes (exit 1)'
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and not __fish_seen_subcommand_from status help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from status" -l timeout -d 'With --watch: give up after this many seconds' -r
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from status" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from status" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from status" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from status" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from status" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from status" -s w -l watch -d 'Follow the rollout'
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from status" -l no-headers -d 'Leave out the header line of the node table'
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from status" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from help" -f -a "status" -d 'How far a pool\'s rollout is: per node, and the pool\'s counts; exit 1 when it is halted by a degraded node. With --watch, follow it until every node runs the target (exit 0), it halts on a degraded node or --timeout passes (exit 1)'
complete -c hearth -n "__fish_hearth_using_subcommand rollout; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c hearth -n "__fish_hearth_using_subcommand node; and not __fish_seen_subcommand_from reset-credential pin unpin exclude include force restore-file help" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand node; and not __fish_seen_subcommand_from reset-credential pin unpin exclude include force restore-file help" -f -a "reset-credential" -d 'Revoke a node\'s credential (a reinstalled machine that lost it) so that it can enroll again with its pool\'s bootstrap token; its labels, status and reboot slot are kept'
complete -c hearth -n "__fish_hearth_using_subcommand node; and not __fish_seen_subcommand_from reset-credential pin unpin exclude include force restore-file help" -f -a "pin" -d 'Hold a node on one rendered config of its pool, whatever the pool renders later (it is moved there under the pool\'s rollout rules if it runs another). Recorded as an event with your identity; `hearth node unpin` lets it follow its pool again'
complete -c hearth -n "__fish_hearth_using_subcommand node; and not __fish_seen_subcommand_from reset-credential pin unpin exclude include force restore-file help" -f -a "unpin" -d 'Let a pinned node follow its pool again'
complete -c hearth -n "__fish_hearth_using_subcommand node; and not __fish_seen_subcommand_from reset-credential pin unpin exclude include force restore-file help" -f -a "exclude" -d 'Take a node out of rollouts (hardware under repair): it gets no new desired config, and neither its state nor its silence holds up or halts its pool\'s rollout. Recorded as an event with your identity; `hearth node include` puts it back'
complete -c hearth -n "__fish_hearth_using_subcommand node; and not __fish_seen_subcommand_from reset-credential pin unpin exclude include force restore-file help" -f -a "include" -d 'Put an excluded node back into rollouts'
complete -c hearth -n "__fish_hearth_using_subcommand node; and not __fish_seen_subcommand_from reset-credential pin unpin exclude include force restore-file help" -f -a "force" -d 'Make a node re-apply its config in full over drift, once (the MCO\'s force file, remotely), through its journal-guarded apply. Recorded as an event with your identity; `hearth describe node` shows the request and, once the node reported it, its outcome'
complete -c hearth -n "__fish_hearth_using_subcommand node; and not __fish_seen_subcommand_from reset-credential pin unpin exclude include force restore-file help" -f -a "restore-file" -d 'Put one drifted file back as the node\'s current config has it, once. Refused for a path the config does not write (its files, unit files and drop-ins). Recorded as an event with your identity; `hearth describe node` shows the outcome'
complete -c hearth -n "__fish_hearth_using_subcommand node; and not __fish_seen_subcommand_from reset-credential pin unpin exclude include force restore-file help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from reset-credential" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from reset-credential" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from reset-credential" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from reset-credential" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from reset-credential" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from reset-credential" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from pin" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from pin" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from pin" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from pin" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from pin" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from pin" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from unpin" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from unpin" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from unpin" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from unpin" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from unpin" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from unpin" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from exclude" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from exclude" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from exclude" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from exclude" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from exclude" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from exclude" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from include" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from include" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from include" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from include" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from include" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from include" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from force" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from force" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from force" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from force" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from force" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from force" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from restore-file" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from restore-file" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from restore-file" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from restore-file" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from restore-file" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from restore-file" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "reset-credential" -d 'Revoke a node\'s credential (a reinstalled machine that lost it) so that it can enroll again with its pool\'s bootstrap token; its labels, status and reboot slot are kept'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "pin" -d 'Hold a node on one rendered config of its pool, whatever the pool renders later (it is moved there under the pool\'s rollout rules if it runs another). Recorded as an event with your identity; `hearth node unpin` lets it follow its pool again'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "unpin" -d 'Let a pinned node follow its pool again'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "exclude" -d 'Take a node out of rollouts (hardware under repair): it gets no new desired config, and neither its state nor its silence holds up or halts its pool\'s rollout. Recorded as an event with your identity; `hearth node include` puts it back'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "include" -d 'Put an excluded node back into rollouts'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "force" -d 'Make a node re-apply its config in full over drift, once (the MCO\'s force file, remotely), through its journal-guarded apply. Recorded as an event with your identity; `hearth describe node` shows the request and, once the node reported it, its outcome'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "restore-file" -d 'Put one drifted file back as the node\'s current config has it, once. Refused for a path the config does not write (its files, unit files and drop-ins). Recorded as an event with your identity; `hearth describe node` shows the outcome'
complete -c hearth -n "__fish_hearth_using_subcommand node; and __fish_seen_subcommand_from help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c hearth -n "__fish_hearth_using_subcommand version" -s o -l output -d 'Output format' -r -f -a "text\t''
json\t''"
complete -c hearth -n "__fish_hearth_using_subcommand version" -l server -d 'The server\'s URL (`https://host:22623`); default `$HEARTH_SERVER` or the login file. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16)' -r
complete -c hearth -n "__fish_hearth_using_subcommand version" -l ca -d 'The server\'s CA certificate; default `$HEARTH_CA` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand version" -l token -d 'The admin token; default `$HEARTH_TOKEN` or the login file' -r
complete -c hearth -n "__fish_hearth_using_subcommand version" -l client-cert -d 'An admin client certificate (PEM, from `hearth-server issue-admin-cert`) instead of a token; default `$HEARTH_CLIENT_CERT` or the login file. Needs --client-key' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand version" -l client-key -d 'The client certificate\'s key (PEM); default `$HEARTH_CLIENT_KEY` or the login file' -r -F
complete -c hearth -n "__fish_hearth_using_subcommand version" -l client -d 'Only the client\'s version (no server needed)'
complete -c hearth -n "__fish_hearth_using_subcommand version" -s h -l help -d 'Print help'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "validate" -d 'Check manifests: one line per problem on stderr, exit 1 if any error'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "render" -d 'Render a pool (or one node) into a single rendered MachineConfig'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "plan" -d 'Show what a node must do to go from one rendered config to another, and the disruption'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "convert" -d 'Print the Ignition config a first-booting node of a given spec version would receive'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "login" -d 'Save the server\'s URL, CA and admin token for the commands below'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "apply" -d 'Apply manifests to the server (all or nothing)'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "get" -d 'List objects on the server: mc, mcp, nodes, events'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "describe" -d 'Show one node or pool in detail, with its events'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "delete" -d 'Delete MachineConfigs, pools or nodes on the server'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "label" -d 'Set (k=v) or remove (k-) labels of a node'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "pause" -d 'Pause a pool\'s rollouts'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "resume" -d 'Resume a pool\'s rollouts'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "rollback" -d 'Roll a pool back to its previous rendered config: `hearth rollback mcp POOL`'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "bootstrap-token" -d 'Make a new bootstrap token for a pool (replacing the old one) and print it'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "viewer-token" -d 'Read-only tokens for the dashboard (`<server>/ui/`): `hearth viewer-token create|delete`'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "rollout" -d 'Follow a pool\'s rollout: `hearth rollout status POOL [--watch]`'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "node" -d 'Act on one node: `hearth node reset-credential NODE`'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "version" -d 'Print the client\'s and the server\'s version and commit'
complete -c hearth -n "__fish_hearth_using_subcommand help; and not __fish_seen_subcommand_from validate render plan convert login apply get describe delete label pause resume rollback bootstrap-token viewer-token rollout node version help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c hearth -n "__fish_hearth_using_subcommand help; and __fish_seen_subcommand_from viewer-token" -f -a "create" -d 'Make a read-only token and print it (shown once); its name goes to stderr'
complete -c hearth -n "__fish_hearth_using_subcommand help; and __fish_seen_subcommand_from viewer-token" -f -a "delete" -d 'Revoke a viewer token by its name (`viewer-…`)'
complete -c hearth -n "__fish_hearth_using_subcommand help; and __fish_seen_subcommand_from rollout" -f -a "status" -d 'How far a pool\'s rollout is: per node, and the pool\'s counts; exit 1 when it is halted by a degraded node. With --watch, follow it until every node runs the target (exit 0), it halts on a degraded node or --timeout passes (exit 1)'
complete -c hearth -n "__fish_hearth_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "reset-credential" -d 'Revoke a node\'s credential (a reinstalled machine that lost it) so that it can enroll again with its pool\'s bootstrap token; its labels, status and reboot slot are kept'
complete -c hearth -n "__fish_hearth_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "pin" -d 'Hold a node on one rendered config of its pool, whatever the pool renders later (it is moved there under the pool\'s rollout rules if it runs another). Recorded as an event with your identity; `hearth node unpin` lets it follow its pool again'
complete -c hearth -n "__fish_hearth_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "unpin" -d 'Let a pinned node follow its pool again'
complete -c hearth -n "__fish_hearth_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "exclude" -d 'Take a node out of rollouts (hardware under repair): it gets no new desired config, and neither its state nor its silence holds up or halts its pool\'s rollout. Recorded as an event with your identity; `hearth node include` puts it back'
complete -c hearth -n "__fish_hearth_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "include" -d 'Put an excluded node back into rollouts'
complete -c hearth -n "__fish_hearth_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "force" -d 'Make a node re-apply its config in full over drift, once (the MCO\'s force file, remotely), through its journal-guarded apply. Recorded as an event with your identity; `hearth describe node` shows the request and, once the node reported it, its outcome'
complete -c hearth -n "__fish_hearth_using_subcommand help; and __fish_seen_subcommand_from node" -f -a "restore-file" -d 'Put one drifted file back as the node\'s current config has it, once. Refused for a path the config does not write (its files, unit files and drop-ins). Recorded as an event with your identity; `hearth describe node` shows the outcome'
