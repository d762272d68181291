//! The house's rules the code is held to: no import circle inside a crate, and no source file
//! longer than [`MAX_FILE_LINES`].
//!
//! Import circles: which source file uses which, read from the code.
//!
//! A file uses another when one of its paths (`use` items, paths in expressions and types, and
//! `crate::`/`self::`/`super::` paths inside macro calls) names an item or module that the other
//! file holds. Each crate target (a `lib.rs`, a `main.rs`, a `src/bin/*.rs`) is read from its root
//! through its `mod` declarations; items under `#[cfg(test)]` are left out (tests are not the
//! structure). A circle is a strongly connected set of two or more files; the check fails on any.
//!
//! `cargo xtask house` prints the circles with the names that tie them, and the long files
//! ([`long_files`]); `xtask/tests/house.rs` fails on either.

use anyhow::{Context, Result};
use proc_macro2::{TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// One file's use of another: the names it takes from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arrow {
    pub from: PathBuf,
    pub to: PathBuf,
    pub names: BTreeSet<String>,
}

/// Files that use each other in a loop, with the arrows between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Circle {
    pub files: Vec<PathBuf>,
    pub arrows: Vec<Arrow>,
}

impl std::fmt::Display for Circle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "a circle of {} files:", self.files.len())?;
        for a in &self.arrows {
            let names: Vec<&str> = a.names.iter().map(String::as_str).collect();
            writeln!(
                f,
                "  {} -> {}: {}",
                a.from.display(),
                a.to.display(),
                names.join(", ")
            )?;
        }
        Ok(())
    }
}

/// The crate targets' root files of the workspace under `root`: every `src/lib.rs`,
/// `src/main.rs` and `src/bin/*.rs` of a directory with a `Cargo.toml`, outside `target/`.
pub fn crate_roots(root: &Path) -> Result<Vec<PathBuf>> {
    let mut roots = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        if dir.join("Cargo.toml").is_file() {
            for name in ["lib.rs", "main.rs"] {
                let f = dir.join("src").join(name);
                if f.is_file() {
                    roots.push(f);
                }
            }
            if let Ok(bins) = std::fs::read_dir(dir.join("src/bin")) {
                for e in bins.flatten() {
                    if e.path().extension().is_some_and(|x| x == "rs") {
                        roots.push(e.path());
                    }
                }
            }
        }
        for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let e = e?;
            let name = e.file_name();
            let name = name.to_string_lossy();
            if e.file_type()?.is_dir()
                && !name.starts_with('.')
                && !matches!(
                    &*name,
                    "target" | "src" | "tests" | "benches" | "node_modules"
                )
            {
                dirs.push(e.path());
            }
        }
    }
    roots.sort();
    Ok(roots)
}

/// The circles of every crate target under `root`, paths relative to `root`.
pub fn circles(root: &Path) -> Result<Vec<Circle>> {
    let mut all = Vec::new();
    for crate_root in crate_roots(root)? {
        let tree = ModuleTree::read(&crate_root)?;
        for mut c in tree.circles() {
            for f in &mut c.files {
                *f = relative(root, f);
            }
            for a in &mut c.arrows {
                a.from = relative(root, &a.from);
                a.to = relative(root, &a.to);
            }
            all.push(c);
        }
    }
    Ok(all)
}

/// The most lines a source file under a crate's `src/` may have (`docs/architecture.md`, "Rules
/// of the house"): one concept per file.
pub const MAX_FILE_LINES: usize = 800;

/// The source files under the crates' `src/` folders longer than [`MAX_FILE_LINES`], with their
/// line counts (paths relative to `root`).
pub fn long_files(root: &Path) -> Result<Vec<(PathBuf, usize)>> {
    let mut long = Vec::new();
    let mut dirs: Vec<PathBuf> = crate_roots(root)?
        .iter()
        .filter_map(|f| {
            f.ancestors()
                .find(|a| a.ends_with("src"))
                .map(Path::to_path_buf)
        })
        .collect();
    dirs.sort();
    dirs.dedup();
    while let Some(dir) = dirs.pop() {
        for e in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = e?.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&path)
                    .with_context(|| format!("reading {}", path.display()))?;
                let lines = text.lines().count();
                if lines > MAX_FILE_LINES {
                    long.push((relative(root, &path), lines));
                }
            }
        }
    }
    long.sort();
    Ok(long)
}

fn relative(root: &Path, p: &Path) -> PathBuf {
    p.strip_prefix(root).unwrap_or(p).to_path_buf()
}

/// One crate target's modules: which file holds each module path, and each file's arrows.
struct ModuleTree {
    files: Vec<PathBuf>,
    /// Module path (without `crate`) → index into `files`.
    modules: HashMap<Vec<String>, usize>,
    /// (from, to) → names.
    arrows: BTreeMap<(usize, usize), BTreeSet<String>>,
    /// `#[macro_export]` macros (which live at the crate root's path) → the file defining them.
    exported_macros: HashMap<String, usize>,
}

impl ModuleTree {
    fn read(crate_root: &Path) -> Result<Self> {
        let mut tree = ModuleTree {
            files: Vec::new(),
            modules: HashMap::new(),
            arrows: BTreeMap::new(),
            exported_macros: HashMap::new(),
        };
        // First the module table (every file and inline module), then the paths of each file,
        // which need the whole table to resolve a child module's name.
        let mut parsed = Vec::new();
        let mut queue = vec![(crate_root.to_path_buf(), Vec::<String>::new())];
        let mut missing = Vec::new();
        while let Some((path, module)) = queue.pop() {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let file =
                syn::parse_file(&text).with_context(|| format!("parsing {}", path.display()))?;
            let index = tree.files.len();
            tree.files.push(path.clone());
            tree.modules.insert(module.clone(), index);
            let dir = child_dir(&path);
            declare(
                &file.items,
                &module,
                &dir,
                index,
                &mut tree.modules,
                &mut queue,
                &mut missing,
            );
            for item in &file.items {
                if let syn::Item::Macro(m) = item {
                    let exported = m.attrs.iter().any(|a| a.path().is_ident("macro_export"));
                    if let (true, Some(name)) = (exported, &m.ident) {
                        tree.exported_macros.insert(name.to_string(), index);
                    }
                }
            }
            parsed.push((index, module, file));
        }
        // A module the checker cannot read would leave its files, and their circles, out.
        if !missing.is_empty() {
            anyhow::bail!("{}", missing.join("; "));
        }
        for (index, module, file) in &parsed {
            let mut reader = PathReader {
                tree: &tree,
                current: module.clone(),
                found: Vec::new(),
            };
            reader.visit_file(file);
            let found = reader.found;
            for (to, name) in found {
                if to != *index {
                    tree.arrows.entry((*index, to)).or_default().insert(name);
                }
            }
        }
        Ok(tree)
    }

    /// Tarjan's strongly connected components of two or more files.
    fn circles(&self) -> Vec<Circle> {
        let n = self.files.len();
        let mut next: Vec<Vec<usize>> = vec![Vec::new(); n];
        for &(a, b) in self.arrows.keys() {
            next[a].push(b);
        }
        let components = strongly_connected(&next);
        components
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| {
                let members: BTreeSet<usize> = c.iter().copied().collect();
                let mut files: Vec<PathBuf> = c.iter().map(|&i| self.files[i].clone()).collect();
                files.sort();
                let mut arrows: Vec<Arrow> = self
                    .arrows
                    .iter()
                    .filter(|((a, b), _)| members.contains(a) && members.contains(b))
                    .map(|((a, b), names)| Arrow {
                        from: self.files[*a].clone(),
                        to: self.files[*b].clone(),
                        names: names.clone(),
                    })
                    .collect();
                arrows.sort_by(|x, y| (&x.from, &x.to).cmp(&(&y.from, &y.to)));
                Circle { files, arrows }
            })
            .collect()
    }
}

/// Where a file's `mod x;` declarations are looked for.
fn child_dir(path: &Path) -> PathBuf {
    let parent = path.parent().unwrap_or(Path::new("."));
    match path.file_name().and_then(|n| n.to_str()) {
        Some("mod.rs" | "lib.rs" | "main.rs") => parent.to_path_buf(),
        _ if path
            .parent()
            .and_then(|p| p.file_name())
            .is_some_and(|n| n == "bin") =>
        {
            parent.to_path_buf()
        }
        _ => parent.join(path.file_stem().unwrap_or_default()),
    }
}

fn declare(
    items: &[syn::Item],
    module: &[String],
    dir: &Path,
    file: usize,
    modules: &mut HashMap<Vec<String>, usize>,
    queue: &mut Vec<(PathBuf, Vec<String>)>,
    missing: &mut Vec<String>,
) {
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        if is_test_only(&m.attrs) {
            continue;
        }
        let mut child = module.to_vec();
        child.push(m.ident.to_string());
        match &m.content {
            Some((_, inner)) => {
                modules.insert(child.clone(), file);
                declare(
                    inner,
                    &child,
                    &dir.join(m.ident.to_string()),
                    file,
                    modules,
                    queue,
                    missing,
                );
            }
            None => {
                let name = m.ident.to_string();
                let flat = dir.join(format!("{name}.rs"));
                let nested = dir.join(&name).join("mod.rs");
                if flat.is_file() {
                    queue.push((flat, child));
                } else if nested.is_file() {
                    queue.push((nested, child));
                } else {
                    missing.push(format!(
                        "`mod {name};` in {}: neither {} nor {} exists (a `#[path]` module is not read)",
                        dir.display(),
                        flat.display(),
                        nested.display()
                    ));
                }
            }
        }
    }
}

/// `#[cfg(test)]`, or `#[cfg(all(test, …))]`: compiled only for the crate's own tests.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let syn::Meta::List(l) = &a.meta else {
            return false;
        };
        let tokens = l.tokens.to_string();
        a.path().is_ident("cfg") && (tokens == "test" || tokens.starts_with("all (test ,"))
    })
}

/// Collects, for one file, the files its paths lead to.
struct PathReader<'a> {
    tree: &'a ModuleTree,
    current: Vec<String>,
    found: Vec<(usize, String)>,
}

impl PathReader<'_> {
    /// `value`: the path names a value (a function called, a constant), whose last segment is
    /// never a module, though a module of that name may stand beside it (`remote::get()`
    /// beside `mod get`).
    fn resolve_as(&mut self, segments: &[String], value: bool) {
        let Some(first) = segments.first() else {
            return;
        };
        let mut abs: Vec<String> = match first.as_str() {
            "crate" => segments[1..].to_vec(),
            "self" | "super" => {
                let mut base = self.current.clone();
                let mut rest = segments;
                if rest[0] == "self" {
                    rest = &rest[1..];
                }
                while rest.first().is_some_and(|s| s == "super") {
                    if base.pop().is_none() {
                        return;
                    }
                    rest = &rest[1..];
                }
                base.extend(rest.iter().cloned());
                base
            }
            name => {
                let mut child = self.current.clone();
                child.push(name.to_string());
                if !self.tree.modules.contains_key(&child) {
                    return;
                }
                let mut abs = self.current.clone();
                abs.extend(segments.iter().cloned());
                abs
            }
        };
        let full = abs.clone();
        // A `#[macro_export]` macro is named at the crate root but defined in its own file.
        if let [name] = full.as_slice() {
            if let Some(&file) = self.tree.exported_macros.get(name) {
                self.found.push((file, name.clone()));
                return;
            }
        }
        if value {
            abs.pop();
        }
        // The longest prefix that is a module, down to the crate root itself (`crate::X` with X
        // defined or re-exported in `lib.rs`).
        loop {
            if let Some(&file) = self.tree.modules.get(&abs) {
                let name = match full.get(abs.len()) {
                    Some(next) => next.clone(),
                    None => full.last().cloned().unwrap_or_else(|| "crate".into()),
                };
                self.found.push((file, name));
                return;
            }
            if abs.pop().is_none() {
                return;
            }
        }
    }

    fn resolve(&mut self, segments: &[String]) {
        self.resolve_as(segments, false);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut path = prefix.clone();
                if n.ident != "self" {
                    path.push(n.ident.to_string());
                }
                self.resolve(&path);
            }
            syn::UseTree::Rename(r) => {
                let mut path = prefix.clone();
                if r.ident != "self" {
                    path.push(r.ident.to_string());
                }
                self.resolve(&path);
            }
            syn::UseTree::Glob(_) => {
                let path = prefix.clone();
                self.resolve(&path);
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Ident(id)
                    if matches!(id.to_string().as_str(), "crate" | "self" | "super")
                        && is_path_sep(&trees, i + 1) =>
                {
                    let mut path = vec![id.to_string()];
                    let mut j = i + 1;
                    while is_path_sep(&trees, j) {
                        match trees.get(j + 2) {
                            Some(TokenTree::Ident(next)) => {
                                path.push(next.to_string());
                                j += 3;
                            }
                            _ => break,
                        }
                    }
                    self.resolve(&path);
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
}

fn is_path_sep(trees: &[TokenTree], i: usize) -> bool {
    matches!(
        (trees.get(i), trees.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && b.as_char() == ':'
    )
}

impl<'ast> Visit<'ast> for PathReader<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            _ => return syn::visit::visit_impl_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if let Some((_, items)) = &m.content {
            self.current.push(m.ident.to_string());
            for item in items {
                self.visit_item(item);
            }
            self.current.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut prefix = Vec::new();
        self.use_tree(&mut prefix, &u.tree);
    }

    fn visit_expr_path(&mut self, e: &'ast syn::ExprPath) {
        let segments: Vec<String> = e
            .path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect();
        self.resolve_as(&segments, segments.len() > 1);
        for seg in &e.path.segments {
            self.visit_path_arguments(&seg.arguments);
        }
        if let Some(q) = &e.qself {
            self.visit_qself(q);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.resolve(&segments);
        syn::visit::visit_path(self, p);
    }

    /// `pub(super)` and `pub(in crate::x)` say who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.tokens(m.tokens.clone());
        syn::visit::visit_macro(self, m);
    }
}

/// Tarjan's algorithm, iterative (a deep module graph must not overflow the stack).
fn strongly_connected(next: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = next.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut counter = 0;
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work = vec![(start, 0usize)];
        while let Some(&mut (v, ref mut edge)) = work.last_mut() {
            if *edge == 0 && index[v] == usize::MAX {
                index[v] = counter;
                low[v] = counter;
                counter += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = next[v].get(*edge) {
                *edge += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                out.push(component);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_of_three_is_one_component_and_a_tail_is_not() {
        // 0 -> 1 -> 2 -> 0, 2 -> 3
        let next = vec![vec![1], vec![2], vec![0, 3], vec![]];
        let mut c: Vec<Vec<usize>> = strongly_connected(&next)
            .into_iter()
            .map(|mut c| {
                c.sort();
                c
            })
            .collect();
        c.sort();
        assert_eq!(c, vec![vec![0, 1, 2], vec![3]]);
    }

    fn tree_of(files: &[(&str, &str)]) -> (tempfile::TempDir, Vec<Circle>) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let c = circles(dir.path()).unwrap();
        (dir, c)
    }

    #[test]
    fn a_child_that_uses_its_parent_which_uses_it_is_a_circle() {
        let (_d, c) = tree_of(&[
            ("src/lib.rs", "mod a;\n"),
            (
                "src/a/mod.rs",
                "mod b;\npub struct P;\nfn f() { b::g(); }\n",
            ),
            ("src/a/b.rs", "use super::P;\npub fn g() {}\n"),
        ]);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(
            c[0].files,
            vec![PathBuf::from("src/a/b.rs"), PathBuf::from("src/a/mod.rs")]
        );
        let text = c[0].to_string();
        assert!(text.contains("src/a/b.rs -> src/a/mod.rs: P"), "{text}");
        assert!(text.contains("src/a/mod.rs -> src/a/b.rs: g"), "{text}");
    }

    #[test]
    fn items_of_the_crate_root_count() {
        // lib.rs uses a child, which uses what lib.rs defines: a circle through the root.
        let (_d, c) = tree_of(&[
            (
                "src/lib.rs",
                "mod a;\npub struct Usage;\npub fn run() { a::go() }\n",
            ),
            ("src/a.rs", "pub fn go() { let _ = crate::Usage; }\n"),
        ]);
        assert_eq!(c.len(), 1, "{c:?}");
        let text = c[0].to_string();
        assert!(text.contains("src/a.rs -> src/lib.rs: Usage"), "{text}");
    }

    #[test]
    fn a_function_beside_a_module_of_its_name_and_an_exported_macro_resolve_to_their_files() {
        // lib.rs calls `remote::get()`, a function of remote/mod.rs beside `mod get`; get.rs
        // uses a macro that out.rs exports at the crate root. No circle: get.rs does not use
        // lib.rs, and lib.rs does not use get.rs.
        let (_d, c) = tree_of(&[
            (
                "src/lib.rs",
                "mod out;\nmod remote;\npub fn run() { remote::get() }\n",
            ),
            (
                "src/out.rs",
                "#[macro_export]\nmacro_rules! say { () => {} }\n",
            ),
            (
                "src/remote/mod.rs",
                "mod get;\npub fn get() { get::list() }\n",
            ),
            ("src/remote/get.rs", "pub fn list() { crate::say!(); }\n"),
        ]);
        assert!(c.is_empty(), "{c:?}");
    }

    #[test]
    fn a_module_whose_file_is_missing_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("Cargo.toml"), "[package]\nname = \"x\"\n").unwrap();
        std::fs::create_dir_all(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "mod gone;\n").unwrap();
        let e = circles(dir.path()).unwrap_err().to_string();
        assert!(e.contains("`mod gone;`"), "{e}");
    }

    #[test]
    fn a_long_file_is_named_with_its_length() {
        let lines = "// x\n".repeat(MAX_FILE_LINES + 1);
        let (d, _) = tree_of(&[("src/lib.rs", "mod a;\n"), ("src/a.rs", &lines)]);
        let long = long_files(d.path()).unwrap();
        assert_eq!(long, vec![(PathBuf::from("src/a.rs"), MAX_FILE_LINES + 1)]);
    }

    #[test]
    fn paths_in_macros_count_and_test_modules_do_not() {
        let (_d, c) = tree_of(&[
            ("src/lib.rs", "mod a;\nmod b;\n"),
            (
                "src/a.rs",
                "pub fn f() { println!(\"{}\", crate::b::G); }\n",
            ),
            (
                "src/b.rs",
                "pub const G: u8 = 1;\n#[cfg(test)]\nmod tests { use crate::a::f; }\n",
            ),
        ]);
        assert!(c.is_empty(), "{c:?}");
        let (_d, c) = tree_of(&[
            ("src/lib.rs", "mod a;\nmod b;\n"),
            (
                "src/a.rs",
                "pub fn f() { println!(\"{}\", crate::b::G); }\n",
            ),
            (
                "src/b.rs",
                "pub const G: u8 = 1;\npub fn h() { crate::a::f() }\n",
            ),
        ]);
        assert_eq!(c.len(), 1, "{c:?}");
    }
}
