//! The `/mcp` fast path, and the one module that owns it: each replica keeps the catalogs it
//! built, by principal, with the generation ([`CatalogGeneration`]) read before building each,
//! and answers a request from one while the generation its authentication read is no newer.
//!
//! The database bumps the generation in the commit of any change to what a catalog is built
//! from (`migrations/0032_mcp_catalog_generation.sql`), so a catalog kept here is never older
//! than its request's own authentication: a request that reads generation `g` has seen every
//! change committed before `g`, and a catalog labelled `g` was read after it. A grant, a filter,
//! a discovery or a revocation reaches the next request on every replica; nothing about a
//! principal lives only here. Without the cache every `tools/call` read the agent, its settings,
//! its routes and their tools again (two round trips) before its submission.

use super::App;
use super::mcp_catalog::McpCatalog;
use crate::db::UserRow;
use crate::error::AppResult;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use switchyard_protocol::UserId;

/// How many principals' catalogs a replica keeps; past it, stale ones go, then all.
const MAX_KEPT: usize = 1024;

/// The generation of every `/mcp` catalog, as a request's authentication read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CatalogGeneration(i64);

impl CatalogGeneration {
    /// The generation a read returned.
    pub(crate) fn read(generation: i64) -> Self {
        Self(generation)
    }
}

/// The catalogs a replica built, by principal.
#[derive(Debug, Default)]
pub(crate) struct CatalogCache {
    kept: Mutex<HashMap<UserId, (CatalogGeneration, Arc<McpCatalog>)>>,
}

impl CatalogCache {
    /// `user`'s catalog, if one was built at `generation` or later, and the generation it was
    /// built at.
    fn get(
        &self,
        user: UserId,
        generation: CatalogGeneration,
    ) -> Option<(Arc<McpCatalog>, CatalogGeneration)> {
        let kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        kept.get(&user)
            .filter(|(built, _)| *built >= generation)
            .map(|(built, catalog)| (catalog.clone(), *built))
    }

    /// Keeps `catalog`, built for `user` at `generation`, unless a newer one is kept already.
    fn keep(&self, user: UserId, generation: CatalogGeneration, catalog: Arc<McpCatalog>) {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        if kept.len() >= MAX_KEPT && !kept.contains_key(&user) {
            kept.retain(|_, (built, _)| *built >= generation);
            if kept.len() >= MAX_KEPT {
                kept.clear();
            }
        }
        match kept.get(&user) {
            Some((built, _)) if *built > generation => {}
            _ => {
                kept.insert(user, (generation, catalog));
            }
        }
    }
}

impl App {
    /// What `user` is offered on `/mcp` ([`App::mcp_catalog`]), built at most once per
    /// `generation` on this replica.
    pub(crate) async fn mcp_catalog_at(
        &self,
        user: &UserRow,
        generation: CatalogGeneration,
    ) -> AppResult<Arc<McpCatalog>> {
        Ok(self.mcp_catalog_built(user, generation).await?.0)
    }

    /// [`App::mcp_catalog_at`], with the generation the catalog was built at (`generation` or
    /// later): it answers every request whose authentication read that one or an older one.
    pub(crate) async fn mcp_catalog_built(
        &self,
        user: &UserRow,
        generation: CatalogGeneration,
    ) -> AppResult<(Arc<McpCatalog>, CatalogGeneration)> {
        if let Some(kept) = self.mcp_catalogs.get(user.id, generation) {
            return Ok(kept);
        }
        let catalog = Arc::new(self.mcp_catalog(user).await?);
        self.mcp_catalogs.keep(user.id, generation, catalog.clone());
        Ok((catalog, generation))
    }
}
