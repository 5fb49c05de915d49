//! The peer command line of BENCH-PROTOCOL.md, declared with clap's derive API: [`Line`]'s
//! fields are the flags (their doc comments are the help), and [`Args::parse`] fills in the
//! defaults that depend on the scenario and refuses what does not fit it.
//!
//! Flags take `--name value` or `--name=value`, and a flag given twice keeps its last value.

use std::{ffi::OsString, fmt, path::PathBuf};

use clap::{CommandFactory as _, FromArgMatches as _, Parser, ValueEnum, error::ErrorKind};

/// One scenario of the protocol's table; `--scenario` takes its [`name`](Self::name).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Inform Pods, sync, settle, report.
    SyncPods,
    /// The same for ConfigMaps.
    #[value(name = "sync-configmaps")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// JSON on the wire.
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

    /// Whether `scenario` takes this mode: `memory` an object shape, the others a wire format.
    fn fits(self, scenario: Scenario) -> bool {
        let shape = matches!(
            self,
            Self::Full | Self::Stripped | Self::Metadata | Self::Projection
        );
        shape == (scenario == Scenario::Memory)
    }

    fn default_for(scenario: Scenario) -> Self {
        if scenario == Scenario::Memory {
            Self::Full
        } else {
            Self::Json
        }
    }
}

/// `--cache`: where kinformer keeps the objects it informs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Cache {
    /// The factory's default: a compact cache, or a decoded one where a type has no codec.
    Default,
    /// kinformer's decoded cache (`FactoryOptions::decoded_cache`).
    Decoded,
}

/// The flags as given; [`Args::parse`] turns them into [`Args`].
#[derive(Debug, Parser)]
#[command(
    name = "PEER",
    about = "A benchmark peer: runs one scenario of xtask/peers/BENCH-PROTOCOL.md against a \
             server and prints its result as one JSON line",
    args_override_self = true
)]
struct Line {
    /// the scenario to run
    #[arg(long, value_name = "NAME")]
    scenario: Scenario,
    /// the kubeconfig of the server to inform from
    #[arg(long, value_name = "PATH")]
    kubeconfig: PathBuf,
    /// how many objects the harness seeded; a different count after sync is reported
    #[arg(long = "n", value_name = "N")]
    expected_objects: Option<usize>,
    /// the wire format, or for memory the object shape [default: json, for memory full]
    #[arg(long, value_name = "MODE")]
    mode: Option<Mode>,
    /// updates the server makes in the phase
    #[arg(long, value_name = "C", default_value_t = DEFAULT_COUNT)]
    count: u64,
    /// updates per second, 0 for as fast as the server can [default: 500 for fanout and
    /// lookups, else 0]
    #[arg(long, value_name = "S")]
    rate: Option<u64>,
    /// reader threads for lookups
    #[arg(long, value_name = "R", default_value_t = DEFAULT_READERS)]
    readers: usize,
    /// handlers registered [default: 3 for watch, 10 for fanout, else 1]
    #[arg(long, value_name = "H")]
    handlers: Option<usize>,
    /// the share of the objects relist changes, in (0, 1]
    #[arg(long, value_name = "F", default_value_t = DEFAULT_FRACTION, value_parser = fraction)]
    fraction: f64,
    /// the cache kinformer keeps its objects in (kinformer only)
    #[arg(long, value_enum, value_name = "CACHE", default_value_t = Cache::Default)]
    cache: Cache,
    /// kinformer decodes watch events on up to W tasks beside the one reading the watch
    /// (kinformer only) [default: on the reading task]
    #[arg(long, value_name = "W")]
    decode_workers: Option<usize>,
    /// inform only shard I of N (0-based), as one of N replicas would (kinformer only)
    #[arg(long, value_name = "I/N", value_parser = shard_of)]
    shard: Option<(u64, u64)>,
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
    /// `--cache decoded`: kinformer caches objects decoded rather than in its default compact
    /// cache (kinformer only).
    pub decoded_cache: bool,
    /// `--decode-workers N`: kinformer decodes watch events on up to N tasks beside the one
    /// reading the watch (kinformer only; absent: on the reading task).
    pub decode_workers: Option<usize>,
    /// `--shard I/N`: inform only shard I of N, by UID (kinformer only).
    pub shard: Option<(u64, u64)>,
}

/// Default `--count`: enough samples for a stable p99.9.
const DEFAULT_COUNT: u64 = 10_000;
/// Default `--rate` for `fanout` and `lookups`: the slow handler (1 ms per call) keeps up.
const DEFAULT_PACED_RATE: u64 = 500;
const DEFAULT_READERS: usize = 2;
const DEFAULT_FRACTION: f64 = 0.1;

impl Args {
    /// Parses a command line, the program's name first (as [`std::env::args_os`] gives it).
    ///
    /// # Errors
    ///
    /// clap's error, which names the flag, when a flag is unknown, lacks its value or has a
    /// value that does not parse, when `--scenario` or `--kubeconfig` is missing, or when
    /// `--mode` or `--handlers` does not fit the scenario; and the help for `--help`.
    /// [`clap::Error::exit`] prints it (the help to stdout, an error to stderr).
    pub fn parse<I, T>(argv: I) -> Result<Self, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        let mut command = Line::command();
        let line = Line::from_arg_matches(&command.try_get_matches_from_mut(argv)?)?;
        let scenario = line.scenario;
        let mode = line.mode.unwrap_or(Mode::default_for(scenario));
        if !mode.fits(scenario) {
            let message = format!(
                "--mode {} does not apply to scenario {scenario}: memory takes \
                 full|stripped|metadata|projection, the others json|protobuf",
                mode.name()
            );
            return Err(command.error(ErrorKind::ArgumentConflict, message));
        }
        let handlers = line.handlers.unwrap_or(scenario.default_handlers());
        if handlers == 0 || (scenario.slow_handler().is_some() && handlers < 2) {
            let message = format!("--handlers {handlers} is too few for scenario {scenario}");
            return Err(command.error(ErrorKind::ArgumentConflict, message));
        }
        let paced = matches!(scenario, Scenario::Fanout | Scenario::Lookups);
        Ok(Self {
            scenario,
            kubeconfig: line.kubeconfig,
            expected_objects: line.expected_objects,
            mode,
            count: line.count,
            rate: line
                .rate
                .unwrap_or(if paced { DEFAULT_PACED_RATE } else { 0 }),
            readers: line.readers,
            handlers,
            fraction: line.fraction,
            decoded_cache: line.cache == Cache::Decoded,
            decode_workers: line.decode_workers,
            shard: line.shard,
        })
    }
}

/// `--shard`: `I/N` with I below N.
fn shard_of(value: &str) -> Result<(u64, u64), String> {
    let (index, count) = value
        .split_once('/')
        .ok_or_else(|| format!("expected I/N, got {value:?}"))?;
    let index: u64 = index.parse().map_err(|error| format!("{error}"))?;
    let count: u64 = count.parse().map_err(|error| format!("{error}"))?;
    if index < count {
        Ok((index, count))
    } else {
        Err(format!("shard {index} of {count}: I must be below N"))
    }
}

/// `--fraction`: a number in (0, 1].
fn fraction(value: &str) -> Result<f64, String> {
    let fraction: f64 = value.parse().map_err(|error| format!("{error}"))?;
    if fraction > 0.0 && fraction <= 1.0 {
        Ok(fraction)
    } else {
        Err(format!("must be in (0, 1], got {fraction}"))
    }
}

#[cfg(test)]
mod tests {
    use std::iter;

    use super::*;

    fn parse(line: &str) -> Result<Args, clap::Error> {
        Args::parse(iter::once("peer").chain(line.split_whitespace()))
    }

    /// The error `line` is refused with, after checking its kind.
    fn refused(line: &str, kind: ErrorKind) -> String {
        match parse(line) {
            Ok(args) => panic!("{line} parsed as {args:?}"),
            Err(error) => {
                assert_eq!(error.kind(), kind, "{line}: {error}");
                error.to_string()
            }
        }
    }

    #[test]
    fn the_declarations_are_consistent() {
        Line::command().debug_assert();
    }

    #[test]
    fn the_cache_flag_takes_default_or_decoded() {
        let decoded = parse("--scenario memory --kubeconfig kc --cache decoded").expect("valid");
        assert!(decoded.decoded_cache);
        let default = parse("--scenario memory --kubeconfig kc --cache default").expect("valid");
        assert!(!default.decoded_cache);
        let absent = parse("--scenario memory --kubeconfig kc").expect("valid");
        assert!(!absent.decoded_cache);
        let compact = refused(
            "--scenario memory --kubeconfig kc --cache compact",
            ErrorKind::InvalidValue,
        );
        assert!(
            compact.contains("compact") && compact.contains("decoded"),
            "{compact}"
        );
    }

    #[test]
    fn defaults_follow_the_scenario_table() {
        let watch = parse("--scenario watch --kubeconfig /kc").expect("valid");
        assert_eq!(watch.scenario, Scenario::Watch);
        assert_eq!(watch.kubeconfig, PathBuf::from("/kc"));
        assert_eq!(watch.handlers, 3);
        assert_eq!(watch.mode, Mode::Json);
        assert_eq!(watch.count, DEFAULT_COUNT);
        assert_eq!(watch.rate, 0);
        assert_eq!(watch.readers, DEFAULT_READERS);
        assert_eq!(watch.fraction, DEFAULT_FRACTION);
        assert_eq!(watch.expected_objects, None);
        assert_eq!(watch.decode_workers, None);

        let fanout = parse("--scenario fanout --kubeconfig /kc").expect("valid");
        assert_eq!(fanout.handlers, 10);
        assert_eq!(fanout.scenario.slow_handler(), Some(0));
        assert_eq!(fanout.rate, DEFAULT_PACED_RATE);
        let lookups = parse("--scenario lookups --kubeconfig /kc").expect("valid");
        assert_eq!((lookups.handlers, lookups.rate), (1, DEFAULT_PACED_RATE));

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
             --readers 4 --handlers 2 --fraction 0.25 --cache decoded --decode-workers 3",
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
                decoded_cache: true,
                decode_workers: Some(3),
                shard: None,
            }
        );
    }

    #[test]
    fn the_harness_command_lines_parse() {
        // As xtask/src/benchsuite/runner.rs builds them: scenario, kubeconfig, --n, --mode, the
        // scenario's arguments (scenarios.rs), then the case's.
        let lines = [
            "--scenario sync-pods --kubeconfig kc --n 100000 --mode protobuf",
            "--scenario sync-configmaps --kubeconfig kc --n 100000 --mode json",
            "--scenario watch --kubeconfig kc --n 100000 --mode protobuf --count 100000 --rate 0 \
             --decode-workers 0",
            "--scenario watch --kubeconfig kc --n 100000 --mode protobuf --count 100000 --rate 0 \
             --cache decoded",
            "--scenario fanout --kubeconfig kc --n 10000 --mode json --count 10000 --rate 2000",
            "--scenario relist --kubeconfig kc --n 100000 --mode json --fraction 0.1",
            "--scenario lookups --kubeconfig kc --n 100000 --mode json --count 25000 --rate 5000 \
             --cache decoded --readers 2",
            "--scenario memory --kubeconfig kc --n 100000 --mode projection",
            "--scenario memory --kubeconfig kc --n 100000 --mode metadata --cache decoded",
            "--scenario sync-real --kubeconfig kc --n 20000 --mode protobuf",
            "--scenario sync-real --kubeconfig kc --n 30000 --mode protobuf --shard 2/3",
        ];
        for line in lines {
            parse(line).unwrap_or_else(|error| panic!("{line}: {error}"));
        }
        let watch = parse(lines[2]).expect("valid");
        assert_eq!(
            (watch.count, watch.rate, watch.decode_workers),
            (100_000, 0, Some(0))
        );
        let lookups = parse(lines[6]).expect("valid");
        assert_eq!((lookups.readers, lookups.decoded_cache), (2, true));
        assert_eq!(parse(lines[10]).expect("valid").shard, Some((2, 3)));
        for bad in ["3/3", "1", "a/3", "1/0"] {
            let line = format!("--scenario sync-real --kubeconfig kc --shard {bad}");
            assert!(parse(&line).is_err(), "{line}");
        }
    }

    #[test]
    fn every_scenario_name_round_trips() {
        for &scenario in Scenario::value_variants() {
            let line = format!("--scenario {scenario} --kubeconfig kc");
            assert_eq!(parse(&line).expect("valid").scenario, scenario);
        }
    }

    #[test]
    fn every_mode_name_round_trips() {
        for &mode in Mode::value_variants() {
            let scenario = if mode.fits(Scenario::Memory) {
                "memory"
            } else {
                "watch"
            };
            let line = format!(
                "--scenario {scenario} --kubeconfig kc --mode {}",
                mode.name()
            );
            assert_eq!(parse(&line).expect("valid").mode, mode);
        }
    }

    #[test]
    fn modes_must_fit_the_scenario() {
        let stripped = parse("--scenario memory --kubeconfig kc --mode stripped").expect("valid");
        assert_eq!(stripped.mode, Mode::Stripped);
        let protobuf =
            parse("--scenario sync-pods --kubeconfig kc --mode protobuf").expect("valid");
        assert_eq!(protobuf.mode, Mode::Protobuf);
        let json = refused(
            "--scenario memory --kubeconfig kc --mode json",
            ErrorKind::ArgumentConflict,
        );
        assert!(json.contains("--mode json"), "{json}");
        refused(
            "--scenario watch --kubeconfig kc --mode metadata",
            ErrorKind::ArgumentConflict,
        );
        let yaml = refused(
            "--scenario watch --kubeconfig kc --mode yaml",
            ErrorKind::InvalidValue,
        );
        assert!(yaml.contains("yaml"), "{yaml}");
    }

    #[test]
    fn a_flag_given_twice_keeps_its_last_value() {
        let args = parse(
            "--scenario watch --kubeconfig a --count 1 --count 2 --scenario fanout --kubeconfig b",
        )
        .expect("valid");
        assert_eq!(
            (args.scenario, args.kubeconfig, args.count),
            (Scenario::Fanout, PathBuf::from("b"), 2)
        );
    }

    #[test]
    fn bad_command_lines_say_what_is_wrong() {
        let missing_kubeconfig = refused("--scenario watch", ErrorKind::MissingRequiredArgument);
        assert!(
            missing_kubeconfig.contains("--kubeconfig"),
            "{missing_kubeconfig}"
        );
        let missing_scenario = refused("--kubeconfig kc", ErrorKind::MissingRequiredArgument);
        assert!(
            missing_scenario.contains("--scenario"),
            "{missing_scenario}"
        );
        let unknown = refused("--scenario warp --kubeconfig kc", ErrorKind::InvalidValue);
        assert!(unknown.contains("warp"), "{unknown}");
        let no_value = refused("--scenario watch --kubeconfig", ErrorKind::InvalidValue);
        assert!(no_value.contains("--kubeconfig"), "{no_value}");
        let not_a_number = refused(
            "--scenario watch --kubeconfig kc --count many",
            ErrorKind::ValueValidation,
        );
        assert!(not_a_number.contains("--count"), "{not_a_number}");
        let fraction = refused(
            "--scenario relist --kubeconfig kc --fraction 0",
            ErrorKind::ValueValidation,
        );
        assert!(fraction.contains("--fraction"), "{fraction}");
        refused(
            "--scenario relist --kubeconfig kc --fraction 1.5",
            ErrorKind::ValueValidation,
        );
        let handlers = refused(
            "--scenario fanout --kubeconfig kc --handlers 1",
            ErrorKind::ArgumentConflict,
        );
        assert!(handlers.contains("--handlers 1"), "{handlers}");
        refused(
            "--scenario watch --kubeconfig kc --handlers 0",
            ErrorKind::ArgumentConflict,
        );
        let bogus = refused(
            "--scenario watch --kubeconfig kc --bogus 1",
            ErrorKind::UnknownArgument,
        );
        assert!(bogus.contains("--bogus"), "{bogus}");
    }

    #[test]
    fn the_help_names_every_flag_of_the_protocol() {
        let help = refused("--help", ErrorKind::DisplayHelp);
        for flag in [
            "--scenario <NAME>",
            "--kubeconfig <PATH>",
            "--n <N>",
            "--mode <MODE>",
            "--count <C>",
            "--rate <S>",
            "--readers <R>",
            "--handlers <H>",
            "--fraction <F>",
            "--cache <CACHE>",
            "--decode-workers <W>",
        ] {
            assert!(help.contains(flag), "{flag} is not in\n{help}");
        }
    }
}
