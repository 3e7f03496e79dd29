use proptest::prelude::*;
use tally_graph::testing::{arb_cfg, GenConfig};
use tally_graph::EdgeKind;
proptest! {
    #[test]
    fn no_reentry_with_self_loop(cfg in arb_cfg(&GenConfig::default())) {
        let re = cfg.edges().any(|(_, e)| e.kind == EdgeKind::Reentry);
        let sl = cfg.edges().any(|(_, e)| e.src == e.dst);
        prop_assert!(!(re && sl));
    }
}
