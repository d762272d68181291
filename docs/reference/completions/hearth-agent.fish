# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_hearth_agent_global_optspecs
    string join \n h/help V/version
end

function __fish_hearth_agent_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_hearth_agent_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_hearth_agent_using_subcommand
    set -l cmd (__fish_hearth_agent_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c hearth-agent -n "__fish_hearth_agent_needs_command" -s h -l help -d 'Print help'
complete -c hearth-agent -n "__fish_hearth_agent_needs_command" -s V -l version -d 'Print version'
complete -c hearth-agent -n "__fish_hearth_agent_needs_command" -f -a "apply" -d 'Apply a config once and exit: 0 when the host is in it, 3 when a reboot is pending, 4 when it differs from it (drift)'
complete -c hearth-agent -n "__fish_hearth_agent_needs_command" -f -a "run" -d 'Run as a daemon: finish any interrupted apply, then apply every new config that appears at the watched file or directory (the newest *.yaml/*.yml/*.json of a directory)'
complete -c hearth-agent -n "__fish_hearth_agent_needs_command" -f -a "status" -d 'Show the node\'s state: current and desired config, state, reason, pending reboot, drift'
complete -c hearth-agent -n "__fish_hearth_agent_needs_command" -f -a "boot-entries" -d 'Put ostree\'s boot entries on the ESP for systemd-boot, a new deployment\'s with a boot counter ("bootCounting" in /etc/hearth/os.json; hearth-boot-entries.service runs this at boot and at shutdown). Does nothing when boot counting is off'
complete -c hearth-agent -n "__fish_hearth_agent_needs_command" -f -a "boot-complete" -d 'Wait for the agent\'s verdict on this boot (hearth-boot-complete.service, ordered before boot-complete.target): exit 0 when the booted deployment is good, 1 when it is not or when no verdict came within the health check\'s timeout (plus 2 minutes)'
complete -c hearth-agent -n "__fish_hearth_agent_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand apply" -l once-from -d 'A MachineConfig file, or an http(s) URL serving one' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand apply" -l root -d 'The host\'s root directory. Without --bus, an offline image root: files, units and keys only, enablement through symlinks, no OS-level changes' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand apply" -l bus -d 'The system bus of the host\'s systemd (default: the system bus when --root is /)' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand apply" -l policy -d 'MachineConfiguration manifests with node-disruption policies' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand apply" -l drift-policy -d 'What a managed file changed by hand means for this apply: report it (exit 4 when the host differs from the config), revert it (put it back), ignore it' -r -f -a "report\t''
revert\t''
ignore\t''"
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand apply" -l drift -d 'A per-path drift policy, PATH=report|revert|ignore (the longest match wins). Repeatable' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand apply" -l force -d 'Re-apply everything even if the host already has this config'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand apply" -l no-reboot -d 'Never reboot: leave the reboot pending (exit 3)'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand apply" -s h -l help -d 'Print help'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l watch -d 'File or directory to watch for the desired config (when not following a server)' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l server -d 'Follow hearth-server at this URL instead of watching a path. Several servers (the replicas of one site): repeat the flag or separate URLs with commas (at most 16); the agent uses one at a time and moves to the next when it cannot be reached, times out or answers 5xx' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l kubeconfig -d 'The kubeconfig to reach the API server with (with --kubernetes)' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l ca -d 'The fleet CA (PEM) that signs the server\'s certificate' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l bootstrap-token-file -d 'A file holding the pool\'s bootstrap token, for the first enrollment' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l bootstrap-token -d 'The pool\'s bootstrap token itself (as the first-boot config writes it into /etc/hearth/agent.env)' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l node-name -d 'This node\'s name (default: the host name)' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l label -d 'A label to enroll with, KEY=VALUE (repeatable)' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l root -d 'The host\'s root directory. Without --bus, an offline image root: files, units and keys only, enablement through symlinks, no OS-level changes' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l bus -d 'The system bus of the host\'s systemd (default: the system bus when --root is /)' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l policy -d 'MachineConfiguration manifests with node-disruption policies' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l interval -d 'How often to look for a new config' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l drift-policy -d 'What to do when a managed file is changed by hand: report (the MCO\'s behaviour), revert (put it back), ignore' -r -f -a "report\t''
revert\t''
ignore\t''"
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l drift -d 'A per-path drift policy, PATH=report|revert|ignore; PATH is a file or a directory (the longest match wins). Repeatable' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l metrics -d 'Serve Prometheus metrics on a local address (127.0.0.1:9701) or unix:/path' -r
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -l kubernetes -d 'Follow this node\'s Node on a Kubernetes API server instead: apply the rendered MachineConfig its `machineconfiguration.openshift.io/desiredConfig` annotation names and write back `currentConfig`, `state` and `reason` as the MCO\'s daemon does (and the node\'s MachineConfigNode status). In-cluster (the service account) unless --kubeconfig is given. HEARTH_KUBERNETES: true, 1, yes or on'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand run" -s h -l help -d 'Print help'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand status" -l root -d 'The host\'s root directory' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand status" -s o -l output -d 'Output format' -r -f -a "text\t''
json\t''"
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand status" -s h -l help -d 'Print help'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand boot-entries" -l root -d 'The host\'s root directory' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand boot-entries" -s h -l help -d 'Print help'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand boot-complete" -l root -d 'The host\'s root directory' -r -F
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand boot-complete" -s h -l help -d 'Print help'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand help; and not __fish_seen_subcommand_from apply run status boot-entries boot-complete help" -f -a "apply" -d 'Apply a config once and exit: 0 when the host is in it, 3 when a reboot is pending, 4 when it differs from it (drift)'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand help; and not __fish_seen_subcommand_from apply run status boot-entries boot-complete help" -f -a "run" -d 'Run as a daemon: finish any interrupted apply, then apply every new config that appears at the watched file or directory (the newest *.yaml/*.yml/*.json of a directory)'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand help; and not __fish_seen_subcommand_from apply run status boot-entries boot-complete help" -f -a "status" -d 'Show the node\'s state: current and desired config, state, reason, pending reboot, drift'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand help; and not __fish_seen_subcommand_from apply run status boot-entries boot-complete help" -f -a "boot-entries" -d 'Put ostree\'s boot entries on the ESP for systemd-boot, a new deployment\'s with a boot counter ("bootCounting" in /etc/hearth/os.json; hearth-boot-entries.service runs this at boot and at shutdown). Does nothing when boot counting is off'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand help; and not __fish_seen_subcommand_from apply run status boot-entries boot-complete help" -f -a "boot-complete" -d 'Wait for the agent\'s verdict on this boot (hearth-boot-complete.service, ordered before boot-complete.target): exit 0 when the booted deployment is good, 1 when it is not or when no verdict came within the health check\'s timeout (plus 2 minutes)'
complete -c hearth-agent -n "__fish_hearth_agent_using_subcommand help; and not __fish_seen_subcommand_from apply run status boot-entries boot-complete help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
