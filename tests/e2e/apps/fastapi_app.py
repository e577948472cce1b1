"""A FastAPI application for the end-to-end tests (served by uvicorn on the
loop under test): path and query parameters with validation, a JSON body
through a pydantic model, a background task that runs after the response,
a streaming response, and a report of the loop it runs on."""

import asyncio

from fastapi import BackgroundTasks, FastAPI
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

app = FastAPI()
# Names of finished background tasks, with the loop each ran on.
DONE: list[dict] = []


class Order(BaseModel):
    item: str
    quantity: int
    unit_price: float


def loop_name() -> str:
    cls = type(asyncio.get_running_loop())
    return f"{cls.__module__}.{cls.__qualname__}"


@app.get("/loop")
async def loop():
    return {"loop": loop_name()}


@app.get("/items/{item_id}")
async def read_item(item_id: int, q: str | None = None):
    return {"item_id": item_id, "q": q}


@app.post("/orders", status_code=201)
async def create_order(order: Order):
    return {**order.model_dump(), "total": order.quantity * order.unit_price}


async def slow_task(name: str) -> None:
    await asyncio.sleep(0.2)
    DONE.append({"name": name, "loop": loop_name()})


@app.post("/tasks/{name}", status_code=202)
async def start_task(name: str, background: BackgroundTasks):
    background.add_task(slow_task, name)
    return {"queued": name, "done_so_far": [d["name"] for d in DONE]}


@app.get("/tasks")
async def tasks():
    return DONE


@app.get("/stream")
async def stream(lines: int = 5):
    async def generate():
        for i in range(lines):
            yield f"line {i}\n".encode()
            await asyncio.sleep(0.01)

    return StreamingResponse(generate(), media_type="text/plain")
