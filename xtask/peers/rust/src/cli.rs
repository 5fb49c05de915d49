//! The peer command line of BENCH-PROTOCOL.md.

use std::{fmt, path::PathBuf};

/// The usage line printed with every command-line error.
pub const USAGE: &str = "usage: PEER --scenario NAME --kubeconfig PATH [--n N] [--mode MODE] \
[--count C] [--rate S] [--readers R] [--handlers H] [--fraction F] [--cache default|compact] \
[--decode-workers W]";

/// One scenario of the protocol's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scenario {
    /// Inform Pods, sync, settle, report.
    SyncPods,
    /// The same for ConfigMaps.
    SyncConfigMaps,
    /// Updates as fast as the server makes them, three handlers.
    Watch,
    /// Updates at a rate, ten handlers, the first one slow.
    Fanout,
    /// A forced relist with changes after sync.
    Relist,
    /// Index lookups from reader threads while updates arrive.
    Lookups,
    /// Sync and settle with full, stripped or metadata-only objects.
    Memory,
    /// `sync-pods` against a real control plane.
    SyncReal,
}

impl Scenario {
    /// Every scenario, in the protocol's order.
    pub const ALL: [Self; 8] = [
        Self::SyncPods,
        Self::SyncConfigMaps,
        Self::Watch,
        Self::Fanout,
        Self::Relist,
        Self::Lookups,
        Self::Memory,
        Self::SyncReal,
    ];

    /// The name on the command line and in the result.
    pub fn name(self) -> &'static str {
        match self {
            Self::SyncPods => "sync-pods",
            Self::SyncConfigMaps => "sync-configmaps",
            Self::Watch => "watch",
            Self::Fanout => "fanout",
            Self::Relist => "relist",
            Self::Lookups => "lookups",
            Self::Memory => "memory",
            Self::SyncReal => "sync-real",
        }
    }

    /// The resource the scenario informs, as the bench endpoints name it.
    pub fn resource(self) -> Resource {
        match self {
            Self::SyncConfigMaps => Resource::ConfigMaps,
            _ => Resource::Pods,
        }
    }

    /// The number of handlers the protocol gives the scenario.
    pub fn default_handlers(self) -> usize {
        match self {
            Self::Watch => 3,
            Self::Fanout => 10,
            _ => 1,
        }
    }

    /// The handler that sleeps 1 ms per call, if the scenario has one.
    pub fn slow_handler(self) -> Option<usize> {
        (self == Self::Fanout).then_some(0)
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The resources the scenarios inform.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// `v1` Pods.
    Pods,
    /// `v1` ConfigMaps.
    ConfigMaps,
}

impl Resource {
    /// The plural the bench endpoints take as `resource=`.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Pods => "pods",
            Self::ConfigMaps => "configmaps",
        }
    }
}

/// `--mode`: the wire format for the informing scenarios, the object shape for `memory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// JSON on the wire (the Rust peers' only format).
    Json,
    /// Protobuf on the wire.
    Protobuf,
    /// `memory`: whole objects.
    Full,
    /// `memory`: objects without `metadata.managedFields`.
    Stripped,
    /// `memory`: metadata-only objects.
    Metadata,
    /// `memory`: a slim projection of each object (the peer's own type).
    Projection,
}

impl Mode {
    /// The name on the command line and in the result.
    pub fn name(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Protobuf => "protobuf",
            Self::Full => "full",
            Self::Stripped => "stripped",
            Self::Metadata => "metadata",
            Self::Projection => "projection",
        }
    }

    fn parse(name: &str, scenario: Scenario) -> Result<Self, String> {
        let mode = match name {
            "json" => Self::Json,
            "protobuf" => Self::Protobuf,
            "full" => Self::Full,
            "stripped" => Self::Stripped,
            "metadata" => Self::Metadata,
            "projection" => Self::Projection,
            other => return Err(format!("--mode: unknown mode {other:?}")),
        };
        let for_memory = matches!(
            mode,
            Self::Full | Self::Stripped | Self::Metadata | Self::Projection
        );
        if for_memory != (scenario == Scenario::Memory) {
            return Err(format!(
                "--mode {name} does not apply to scenario {scenario}: memory takes \
                 full|stripped|metadata|projection, the others json|protobuf"
            ));
        }
        Ok(mode)
    }

    fn default_for(scenario: Scenario) -> Self {
        if scenario == Scenario::Memory {
            Self::Full
        } else {
            Self::Json
        }
    }
}

/// A parsed command line, with the protocol's defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Args {
    /// What to run.
    pub scenario: Scenario,
    /// The server to inform from.
    pub kubeconfig: PathBuf,
    /// How many objects the harness seeded, when it says; a mismatch after sync is reported.
    pub expected_objects: Option<usize>,
    /// Wire format, or object shape for `memory`.
    pub mode: Mode,
    /// Updates the server makes in the phase.
    pub count: u64,
    /// Updates per second (0: as fast as the server can).
    pub rate: u64,
    /// Reader threads for `lookups`.
    pub readers: usize,
    /// Handlers registered.
    pub handlers: usize,
    /// Share of the objects `relist` changes.
    pub fraction: f64,
    /// `--cache compact`: kinformer caches in a compact cache (kinformer only).
    pub compact_cache: bool,
    /// `--decode-workers N`: kinformer decodes watch events on up to N tasks beside the one
    /// reading the watch (kinformer only; absent: on the reading task).
    pub decode_workers: Option<usize>,
}

/// Default `--count`: enough samples for a stable p99.9.
const DEFAULT_COUNT: u64 = 10_000;
/// Default `--rate` for `fanout` and `lookups`: the slow handler (1 ms per call) keeps up.
const DEFAULT_PACED_RATE: u64 = 500;
const DEFAULT_READERS: usize = 2;
const DEFAULT_FRACTION: f64 = 0.1;

impl Args {
    /// Parses the arguments after the program name.
    ///
    /// # Errors
    ///
    /// A message naming the flag when a flag is unknown, lacks its value, has a value that does
    /// not parse, or when `--scenario` or `--kubeconfig` is missing.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut scenario = None;
        let mut kubeconfig = None;
        let mut expected_objects = None;
        let mut mode = None;
        let mut count = None;
        let mut rate = None;
        let mut readers = None;
        let mut handlers = None;
        let mut fraction = None;
        let mut compact_cache = false;
        let mut decode_workers = None;
        let mut args = args.into_iter();
        while let Some(flag) = args.next() {
            let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--scenario" => {
                    scenario = Some(
                        Scenario::ALL
                            .into_iter()
                            .find(|scenario| scenario.name() == value)
                            .ok_or_else(|| format!("--scenario: unknown scenario {value:?}"))?,
                    );
                }
                "--kubeconfig" => kubeconfig = Some(PathBuf::from(value)),
                "--n" => expected_objects = Some(number(&flag, &value)?),
                "--mode" => mode = Some(value),
                "--count" => count = Some(number(&flag, &value)?),
                "--rate" => rate = Some(number(&flag, &value)?),
                "--readers" => readers = Some(number(&flag, &value)?),
                "--handlers" => handlers = Some(number(&flag, &value)?),
                "--fraction" => fraction = Some(number(&flag, &value)?),
                "--decode-workers" => decode_workers = Some(number(&flag, &value)?),
                "--cache" => {
                    compact_cache = match value.as_str() {
                        "compact" => true,
                        "default" => false,
                        other => {
                            return Err(format!(
                                "--cache: unknown cache {other:?}; expected default or compact"
                            ));
                        }
                    };
                }
                other => return Err(format!("unknown flag {other}")),
            }
        }
        let scenario = scenario.ok_or("--scenario is required")?;
        let mode = match mode {
            Some(name) => Mode::parse(&name, scenario)?,
            None => Mode::default_for(scenario),
        };
        let fraction = fraction.unwrap_or(DEFAULT_FRACTION);
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(format!("--fraction must be in (0, 1], got {fraction}"));
        }
        let handlers = handlers.unwrap_or(scenario.default_handlers());
        if handlers == 0 || (scenario.slow_handler().is_some() && handlers < 2) {
            return Err(format!(
                "--handlers {handlers} is too few for scenario {scenario}"
            ));
        }
        let paced = matches!(scenario, Scenario::Fanout | Scenario::Lookups);
        Ok(Self {
            scenario,
            kubeconfig: kubeconfig.ok_or("--kubeconfig is required")?,
            expected_objects,
            mode,
            count: count.unwrap_or(DEFAULT_COUNT),
            rate: rate.unwrap_or(if paced { DEFAULT_PACED_RATE } else { 0 }),
            readers: readers.unwrap_or(DEFAULT_READERS),
            handlers,
            fraction,
            compact_cache,
            decode_workers,
        })
    }
}

fn number<T: std::str::FromStr>(flag: &str, value: &str) -> Result<T, String>
where
    T::Err: fmt::Display,
{
    value
        .parse()
        .map_err(|error| format!("{flag} {value:?}: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Args, String> {
        Args::parse(line.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn the_cache_flag_takes_default_or_compact() {
        let compact = parse("--scenario memory --kubeconfig kc --cache compact").expect("valid");
        assert!(compact.compact_cache);
        let default = parse("--scenario memory --kubeconfig kc").expect("valid");
        assert!(!default.compact_cache);
        assert!(parse("--scenario memory --kubeconfig kc --cache tiny").is_err());
    }

    #[test]
    fn defaults_follow_the_scenario_table() {
        let watch = parse("--scenario watch --kubeconfig /kc").expect("valid");
        assert_eq!(watch.scenario, Scenario::Watch);
        assert_eq!(watch.kubeconfig, PathBuf::from("/kc"));
        assert_eq!(watch.handlers, 3);
        assert_eq!(watch.mode, Mode::Json);
        assert_eq!(watch.rate, 0);
        assert_eq!(watch.expected_objects, None);

        let fanout = parse("--scenario fanout --kubeconfig /kc").expect("valid");
        assert_eq!(fanout.handlers, 10);
        assert_eq!(fanout.scenario.slow_handler(), Some(0));
        assert_eq!(fanout.rate, DEFAULT_PACED_RATE);

        let memory = parse("--scenario memory --kubeconfig /kc").expect("valid");
        assert_eq!(memory.mode, Mode::Full);
        assert_eq!(memory.handlers, 1);
        assert_eq!(
            parse("--scenario sync-configmaps --kubeconfig /kc")
                .expect("valid")
                .scenario
                .resource(),
            Resource::ConfigMaps
        );
    }

    #[test]
    fn every_flag_is_read() {
        let args = parse(
            "--scenario lookups --kubeconfig kc --n 20000 --mode json --count 5 --rate 7 \
             --readers 4 --handlers 2 --fraction 0.25 --cache compact --decode-workers 3",
        )
        .expect("valid");
        assert_eq!(
            args,
            Args {
                scenario: Scenario::Lookups,
                kubeconfig: PathBuf::from("kc"),
                expected_objects: Some(20_000),
                mode: Mode::Json,
                count: 5,
                rate: 7,
                readers: 4,
                handlers: 2,
                fraction: 0.25,
                compact_cache: true,
                decode_workers: Some(3),
            }
        );
    }

    #[test]
    fn every_scenario_name_round_trips() {
        for scenario in Scenario::ALL {
            let line = format!("--scenario {scenario} --kubeconfig kc");
            assert_eq!(parse(&line).expect("valid").scenario, scenario);
        }
    }

    #[test]
    fn modes_must_fit_the_scenario() {
        let stripped = parse("--scenario memory --kubeconfig kc --mode stripped").expect("valid");
        assert_eq!(stripped.mode, Mode::Stripped);
        let protobuf =
            parse("--scenario sync-pods --kubeconfig kc --mode protobuf").expect("valid");
        assert_eq!(protobuf.mode, Mode::Protobuf);
        assert!(parse("--scenario memory --kubeconfig kc --mode json").is_err());
        assert!(parse("--scenario watch --kubeconfig kc --mode metadata").is_err());
        assert!(parse("--scenario watch --kubeconfig kc --mode yaml").is_err());
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        let missing_kubeconfig = parse("--scenario watch").expect_err("invalid");
        assert!(
            missing_kubeconfig.contains("--kubeconfig"),
            "{missing_kubeconfig}"
        );
        let missing_scenario = parse("--kubeconfig kc").expect_err("invalid");
        assert!(
            missing_scenario.contains("--scenario"),
            "{missing_scenario}"
        );
        let unknown = parse("--scenario warp --kubeconfig kc").expect_err("invalid");
        assert!(unknown.contains("warp"), "{unknown}");
        let no_value = parse("--scenario watch --kubeconfig").expect_err("invalid");
        assert!(
            no_value.contains("--kubeconfig needs a value"),
            "{no_value}"
        );
        let not_a_number =
            parse("--scenario watch --kubeconfig kc --count many").expect_err("invalid");
        assert!(not_a_number.contains("--count"), "{not_a_number}");
        assert!(parse("--scenario relist --kubeconfig kc --fraction 0").is_err());
        assert!(parse("--scenario fanout --kubeconfig kc --handlers 1").is_err());
        assert!(parse("--scenario watch --kubeconfig kc --bogus 1").is_err());
    }
}
