//! Adopting kernel arguments: recording arguments present in the booted deployment as added by
//! hearth, in the ledger (see `OsBackend::adopt_kernel_arguments` in hearth-hostops).

use hearth_hostops::os::{KargLedger, OsConfig, OsError};

use crate::session::Session;

impl Session {
    pub(crate) fn adopt_kernel_arguments(
        &self,
        config: &OsConfig,
        kargs: &[String],
    ) -> Result<Vec<String>, OsError> {
        let booted = self.info(&self.booted, config);
        let ledger = KargLedger::new(&self.root);
        let mut file = ledger.load()?;
        let mut owned = file.hearth_added(&booted.kernel_args);
        for arg in kargs {
            let have = owned.iter().filter(|a| *a == arg).count();
            let present = booted.kernel_args.iter().filter(|a| *a == arg).count();
            if have < present {
                owned.push(arg.clone());
            }
        }
        file.record(&booted.kernel_args, &owned);
        ledger.store(&file)?;
        Ok(file.hearth_added(&booted.kernel_args))
    }
}
