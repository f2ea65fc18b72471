"""grad and value_and_grad as decorator factories, as Equinox's
`filter_value_and_grad(has_aux=True)` is written."""

import jax
import jax.numpy as jnp

import treespec


@treespec.value_and_grad(has_aux=True)
def loss(w: jax.Array, x: jax.Array) -> tuple[jax.Array, str]:
    return jnp.sum(w * x), "aux"


@treespec.grad(wrt=None, argnums=0)
def grad_of(w: jax.Array) -> jax.Array:
    return jnp.sum(w**2)


(value, aux), grads = loss(jnp.ones(2), jnp.ones(2))
g = grad_of(jnp.ones(2))
